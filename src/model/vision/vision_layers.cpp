#include "model/vision/vision_layers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace tandem {

namespace {

constexpr int kBlock = 16;

int blocks_of(int n) {
  return (n + kBlock - 1) / kBlock;
}

}  // namespace

std::vector<int32_t> iota_ids(int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

Tensor upload_i32(Backend& be, const std::vector<int32_t>& v) {
  Tensor t = be.alloc(DType::I32, {std::max<int64_t>(1, int64_t(v.size()))});
  if (!v.empty()) be.write_i32(t, v.data(), int64_t(v.size()));
  return t.slice_rows(0, int64_t(v.size()));
}

ImageBatch make_image_batch(Backend& be, std::span<const int> lengths) {
  ImageBatch b;
  b.lengths.assign(lengths.begin(), lengths.end());
  int max_blocks = 1, max_len = 0;
  for (int n : lengths) {
    TANDEM_CHECK(n > 0, "image batch: an image of {} tokens", n);
    max_blocks = std::max(max_blocks, blocks_of(n));
    max_len = std::max(max_len, n);
  }
  std::vector<int32_t> positions, starts{0}, context, slots, table, ends;
  int next_block = 0;
  for (int n : lengths) {
    for (int p = 0; p < n; p++) {
      positions.push_back(p);
      slots.push_back((next_block + p / kBlock) * kBlock + p % kBlock);
      ends.push_back(n);
    }
    for (int j = 0; j < max_blocks; j++)
      table.push_back(next_block + std::min(j, blocks_of(n) - 1));
    next_block += blocks_of(n);
    starts.push_back(int32_t(positions.size()));
    context.push_back(n);
  }
  b.num_tokens = int(positions.size());
  StepTensors& s = b.step;
  s.num_tokens = b.num_tokens;
  s.num_rows = int(lengths.size());
  s.block_size = kBlock;
  s.max_context_len = max_len;
  s.tokens = upload_i32(be, std::vector<int32_t>(positions.size(), 0));
  s.positions = upload_i32(be, positions);
  s.seq_starts = upload_i32(be, starts);
  s.context_lens = upload_i32(be, context);
  s.sample_index = upload_i32(be, {0});
  s.media_ends = upload_i32(be, ends);
  s.groups.push_back({upload_i32(be, slots),
                      upload_i32(be, table).reshape({int64_t(lengths.size()), int64_t(max_blocks)}),
                      max_blocks});
  return b;
}

Tensor image_attention(Backend& be, const ImageBatch& batch, const Tensor& q, const Tensor& k,
                       const Tensor& v, float scale) {
  const int64_t N = batch.num_tokens, Hkv = k.dim(1), Dh = k.dim(2);
  TANDEM_CHECK(q.dim(0) == N && k.dim(0) == N && v.shape == k.shape,
               "image_attention: q {} k {} v {} for {} tokens", q.shape.str(), k.shape.str(),
               v.shape.str(), N);
  int64_t blocks = 0;
  for (int n : batch.lengths) blocks += blocks_of(n);
  PagedKv cache{be.alloc(be.act_dtype(), {blocks, kBlock, Hkv, Dh}),
                be.alloc(be.act_dtype(), {blocks, kBlock, Hkv, Dh}), 0};
  be.write_kv(cache, k, v, batch.step);
  AttentionParams params;
  params.scale = scale;
  params.media_bidirectional = true;
  Tensor out = be.alloc(be.act_dtype(), q.shape);
  be.attention(out, q, cache, batch.step, params);
  return out;
}

Tensor layer_norm(Backend& be, const Tensor& x, const LayerNormW& n) {
  Tensor out = be.alloc(x.dtype, x.shape);
  be.layer_norm(out, x, n.weight, n.bias, n.eps);
  return out;
}

Tensor clipped_linear(Backend& be, const Tensor& x, const ClippedLinear& l) {
  Tensor in = x;
  if (std::isfinite(l.in_min) || std::isfinite(l.in_max)) {
    in = be.alloc(x.dtype, x.shape);
    be.copy(in, x);
    be.clamp(in, l.in_min, l.in_max);
  }
  Tensor out = linear(be, in, l.linear);
  if (std::isfinite(l.out_min) || std::isfinite(l.out_max)) be.clamp(out, l.out_min, l.out_max);
  return out;
}

Tensor activation(Backend& be, const Tensor& x, Activation act, Tensor& ones_cache) {
  // Row slices of at most kRows rows, so the ones stay small whatever the batch.
  constexpr int64_t kRows = 256;
  const int64_t R = x.rows(), C = x.cols(), n = std::min(R, kRows) * C;
  if (!ones_cache.defined() || ones_cache.numel() < n) ones_cache = ones(be, n);
  const Tensor rows = x.reshape({R, C});
  Tensor out = be.alloc(x.dtype, {R, C});
  for (int64_t r = 0; r < R; r += kRows) {
    const int64_t m = std::min(kRows, R - r);
    Tensor dst = out.slice_rows(r, m);
    be.act_mul(dst, rows.slice_rows(r, m), ones_cache.slice_rows(0, m * C).reshape({m, C}), act);
  }
  return out.reshape(x.shape);
}

Tensor sum_rows(Backend& be, const Tensor& x, const std::vector<std::vector<int32_t>>& index) {
  TANDEM_CHECK(!index.empty(), "sum_rows: nothing to sum");
  Tensor out = gather_rows(be, x, upload_i32(be, index[0]));
  for (size_t j = 1; j < index.size(); j++)
    be.add(out, out, gather_rows(be, x, upload_i32(be, index[j])));
  return out;
}

Linear tower_linear(WeightLoader& w, const std::string& name, int layer, Shape expected) {
  Linear l;
  l.weight = w.load(name, layer, expected);
  l.bias = w.load(name + "_bias", layer, {expected[0]}, /*must_exist=*/false);
  return l;
}

}  // namespace tandem
