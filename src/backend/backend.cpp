#include "backend/backend.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace tandem {

Linear expert_linear(const Linear& stacked, int64_t e) {
  TANDEM_CHECK(stacked.weight.ndim() == 3 && e >= 0 && e < stacked.weight.dim(0),
               "expert {} of a stacked projection {}", e, stacked.weight.shape.str());
  TANDEM_CHECK(!stacked.bias.defined() && !stacked.lora, "expert projections take no bias or LoRA");
  auto one = [e](const Tensor& t) {
    Tensor v = t.slice_rows(e, 1);
    Shape s;
    s.ndim = std::max(1, t.ndim() - 1);
    for (int i = 1; i < t.ndim(); i++) s.dims[i - 1] = t.dim(i);
    if (t.ndim() == 1) s.dims[0] = 1;
    return v.reshape(s);
  };
  Linear l;
  l.weight = one(stacked.weight);
  if (stacked.quant) {
    LinearQuant q = *stacked.quant;
    q.weight_scale = one(q.weight_scale);
    if (q.input_scale.defined()) q.input_scale = one(q.input_scale);
    l.quant = std::move(q);
  }
  return l;
}

int64_t Backend::available_memory() const {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (in >> key >> kb)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t(4) << 30;
}

void Backend::capture_begin() { fail("{}: graphs are not supported", name()); }
std::shared_ptr<void> Backend::capture_end() { fail("{}: graphs are not supported", name()); }
void Backend::replay(const std::shared_ptr<void>&) { fail("{}: graphs are not supported", name()); }

void Backend::write_i32_rows(Tensor& dst, const int32_t* src, int64_t rows, int64_t cols) {
  TANDEM_CHECK(device() == Device::CPU, "write_i32_rows needs an override on {}", name());
  TANDEM_CHECK(dst.dtype == DType::I32 && dst.ndim() == 2 && rows <= dst.dim(0) &&
                   cols <= dst.dim(1) && rows >= 0 && cols >= 0,
               "write_i32_rows: [{}, {}] does not fit in dst {}", rows, cols, dst.shape.str());
  for (int64_t r = 0; r < rows; r++)
    std::memcpy(dst.ptr<int32_t>() + r * dst.dim(1), src + r * cols, size_t(cols) * sizeof(int32_t));
}

void Backend::qkv_to_cache(Tensor& q, const Tensor& qkv, PagedKv& cache,
                           const StepTensors& step, const RopeSpec& rope_spec,
                           const QkNorm& norm) {
  TANDEM_CHECK(q.ndim() == 3 && qkv.ndim() == 2 && cache.k.ndim() == 4 && qkv.dim(0) == q.dim(0),
               "qkv_to_cache: q {} qkv {} cache {}", q.shape.str(), qkv.shape.str(),
               cache.k.shape.str());
  const int64_t T = q.dim(0), Hq = q.dim(1), Dh = q.dim(2), Hkv = cache.k.dim(2);
  const bool v_is_k = qkv.dim(1) == (Hq + Hkv) * Dh;
  TANDEM_CHECK((v_is_k || qkv.dim(1) == (Hq + 2 * Hkv) * Dh) && cache.k.dim(3) == Dh,
               "qkv_to_cache: qkv {} is not [T, ({} + 2·{})·{}] or [T, ({} + {})·{}]",
               qkv.shape.str(), Hq, Hkv, Dh, Hq, Hkv, Dh);
  Tensor qf = q.reshape({T, Hq * Dh});
  Tensor k = alloc(act_dtype(), {T, Hkv * Dh}), v = alloc(act_dtype(), {T, Hkv * Dh});
  if (v_is_k) {
    split_columns(qkv, {&qf, &k});
    copy(v, k);
  } else {
    split_columns(qkv, {&qf, &k, &v});
  }
  auto norm_heads = [&](Tensor& x, int64_t heads, const Tensor& w) {
    if (!w.defined()) return;
    Tensor rows = x.reshape({T * heads, Dh});
    rms_norm(rows, rows, w, norm.eps, norm.weight_offset);
  };
  norm_heads(q, Hq, norm.q);
  norm_heads(k, Hkv, norm.k);
  norm_heads(v, Hkv, norm.v);
  k = k.reshape({T, Hkv, Dh});
  v = v.reshape({T, Hkv, Dh});
  rope(q, step, rope_spec);
  rope(k, step, rope_spec);
  write_kv(cache, k, v, step);
}

void Backend::concat_columns(Tensor& out, std::span<const Tensor> parts) {
  TANDEM_CHECK(device() == Device::CPU, "concat_columns needs an override on {}", name());
  int64_t total = 0;
  for (const Tensor& p : parts) {
    TANDEM_CHECK(p.dtype == out.dtype && p.rows() == out.rows(), "concat_columns {} -> {}",
                 p.shape.str(), out.shape.str());
    total += p.cols();
  }
  TANDEM_CHECK(total == out.cols(), "concat_columns: pieces sum to {} of {}", total, out.cols());
  const size_t esize = dtype_size(out.dtype);
  char* dst = static_cast<char*>(out.data);
  for (int64_t r = 0; r < out.rows(); r++) {
    int64_t col = 0;
    for (const Tensor& p : parts) {
      std::memcpy(dst + size_t(r * out.cols() + col) * esize,
                  static_cast<const char*>(p.data) + size_t(r * p.cols()) * esize,
                  size_t(p.cols()) * esize);
      col += p.cols();
    }
  }
}

void Backend::split_columns(const Tensor& x, std::initializer_list<Tensor*> outs) {
  TANDEM_CHECK(device() == Device::CPU, "split_columns needs an override on {}", name());
  int64_t total = 0;
  for (Tensor* o : outs) {
    TANDEM_CHECK(o->dtype == x.dtype && o->rows() == x.rows(), "split_columns {} -> {}",
                 x.shape.str(), o->shape.str());
    total += o->cols();
  }
  TANDEM_CHECK(total == x.cols(), "split_columns: pieces sum to {} of {}", total, x.cols());
  size_t esize = dtype_size(x.dtype);
  const char* src = static_cast<const char*>(x.data);
  for (int64_t r = 0; r < x.rows(); r++) {
    int64_t col = 0;
    for (Tensor* o : outs) {
      std::memcpy(static_cast<char*>(o->data) + size_t(r * o->cols()) * esize,
                  src + size_t(r * x.cols() + col) * esize, size_t(o->cols()) * esize);
      col += o->cols();
    }
  }
}

// The host-backend halves of sampling: the work happens in sample_async, whose results
// wait in the pending state.
PendingSample Backend::sample_async(Tensor& logits, std::span<const SampleRow> rows,
                                    const Tensor* draft_logits) {
  auto picked = std::make_shared<std::vector<SampledToken>>(rows.size());
  sample(logits, rows, *picked, draft_logits);
  return PendingSample{int(rows.size()), picked};
}

void Backend::sample_wait(PendingSample& pending, std::span<SampledToken> out) {
  auto* picked = static_cast<std::vector<SampledToken>*>(pending.state.get());
  TANDEM_CHECK(picked && picked->size() == out.size(), "sample_wait: {} outputs for {} rows",
               out.size(), pending.num_rows);
  std::move(picked->begin(), picked->end(), out.begin());
  pending.state.reset();
}

void Backend::feed_tokens(Tensor& tokens, std::span<const int32_t> dst,
                          std::span<const int32_t> src, const PendingSample& from) {
  TANDEM_CHECK(device() == Device::CPU, "feed_tokens needs an override on {}", name());
  auto* picked = static_cast<const std::vector<SampledToken>*>(from.state.get());
  TANDEM_CHECK(picked && dst.size() == src.size(), "feed_tokens: no pending results to read");
  for (size_t i = 0; i < dst.size(); i++) {
    TANDEM_CHECK(dst[i] >= 0 && dst[i] < tokens.numel() && src[i] >= 0 &&
                     src[i] < int32_t(picked->size()),
                 "feed_tokens: pair {} ({} <- {}) out of range", i, dst[i], src[i]);
    tokens.ptr<int32_t>()[dst[i]] = (*picked)[size_t(src[i])].token;
  }
}

Tensor Backend::sampled_ids(const PendingSample& from) {
  TANDEM_CHECK(device() == Device::CPU, "sampled_ids needs an override on {}", name());
  auto* picked = static_cast<const std::vector<SampledToken>*>(from.state.get());
  TANDEM_CHECK(picked && int64_t(picked->size()) == from.num_rows,
               "sampled_ids: no pending results to read");
  Tensor ids = alloc(DType::I32, {int64_t(from.num_rows)});
  for (size_t i = 0; i < picked->size(); i++) ids.ptr<int32_t>()[i] = (*picked)[i].token;
  return ids;
}

PendingSample Backend::picked_ids(Tensor ids) {
  TANDEM_CHECK(device() == Device::CPU, "picked_ids needs an override on {}", name());
  TANDEM_CHECK(ids.dtype == DType::I32 && ids.ndim() == 1, "picked_ids: ids must be [S] i32");
  auto picked = std::make_shared<std::vector<SampledToken>>(size_t(ids.numel()));
  for (size_t i = 0; i < picked->size(); i++) (*picked)[i].token = ids.ptr<int32_t>()[i];
  return PendingSample{int(ids.numel()), picked};
}

}  // namespace tandem

// --- elementwise and stream-mixing ops (Gemma 3n and 4 use them) ---
// Defaults for backends that do not implement them yet: a clear error, never a wrong result.
namespace tandem {

void Backend::rms_norm_fp8(Tensor& out, Fp8Input& q, const Tensor& x, const Tensor& w, float eps,
                           float weight_offset) {
  q = Fp8Input{};
  rms_norm(out, x, w, eps, weight_offset);
}

void Backend::add_rms_norm_fp8(Tensor& out, Fp8Input& q, Tensor& residual, const Tensor& x,
                               const Tensor& w, float eps, float weight_offset) {
  q = Fp8Input{};
  add_rms_norm(out, residual, x, w, eps, weight_offset);
}

void Backend::gated_act_fp8(Tensor& out, Fp8Input& q, const Tensor& gate_up, Activation act) {
  q = Fp8Input{};
  gated_act(out, gate_up, act);
}

void Backend::linear_fp8_input(Tensor& out, const Tensor& x, const Fp8Input&, const Linear& l) {
  linear(out, x, l);
}

void Backend::lora_add(Tensor&, const Tensor&, const LinearLora&, const LoraRows&) {
  fail("{}: op 'lora_add' is not implemented", name());
}

void Backend::segment_sum(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'segment_sum' is not implemented", name());
}

void Backend::sub(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'sub' is not implemented", name());
}
void Backend::mul(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'mul' is not implemented", name());
}
void Backend::act_mul(Tensor&, const Tensor&, const Tensor&, Activation) {
  fail("{}: op 'act_mul' is not implemented", name());
}
void Backend::gaussian_topk(Tensor&, float) {
  fail("{}: op 'gaussian_topk' is not implemented", name());
}
void Backend::match_rms(Tensor&, const Tensor&, float) {
  fail("{}: op 'match_rms' is not implemented", name());
}
void Backend::mix_streams(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'mix_streams' is not implemented", name());
}
void Backend::swap_leading_dims(Tensor&, const Tensor&) {
  fail("{}: op 'swap_leading_dims' is not implemented", name());
}
void Backend::layer_norm(Tensor&, const Tensor&, const Tensor&, const Tensor&, float) {
  fail("{}: op 'layer_norm' is not implemented", name());
}
void Backend::clamp(Tensor&, float, float) {
  fail("{}: op 'clamp' is not implemented", name());
}

}  // namespace tandem
