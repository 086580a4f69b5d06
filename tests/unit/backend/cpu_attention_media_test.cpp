// Paged attention with images (StepTensors::media_ends, AttentionParams::
// media_bidirectional): a token inside an image also sees the rest of its image, the
// window still cutting the past (the image's own tokens included, as transformers' masks
// do), against a naive double loop over the row's dense K/V; the ends are ignored by
// layers that do not ask for them; a row's output does not depend on the rows beside it;
// bad ends are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "step_builder.h"

namespace tandem {
namespace cpu_attention_media_test {

using test::device_f32;
using test::device_i32;
using test::rel_err;
using test::to_vec;

constexpr int kBlock = 16;
constexpr int Hq = 4, Hkv = 2, Dh = 16;

// One row computing positions [start, end) over a cached prefix [0, start), with its image
// spans [begin, end) (positions).
struct MediaRow {
  int start = 0, end = 0;
  std::vector<std::pair<int, int>> images;
};

struct RowData {
  std::vector<int32_t> blocks;
  std::vector<float> k, v, q;  // k, v [end, Hkv, Dh]; q [end - start, Hq, Dh]
};

// The image a position lies in, or (0, 0).
std::pair<int, int> image_of(const MediaRow& r, int p) {
  for (auto [b, e] : r.images)
    if (b <= p && p < e) return {b, e};
  return {0, 0};
}

// Naive attention of the row's new tokens in double: causal and windowed, each image
// token also seeing its image's later tokens when the layer asks.
std::vector<double> reference(const MediaRow& r, const RowData& d, const AttentionParams& params) {
  std::vector<double> out(size_t((r.end - r.start) * Hq * Dh), 0.0);
  for (int p = r.start; p < r.end; p++) {
    int lo = params.window > 0 ? std::max(0, p - params.window + 1) : 0, hi = p;
    if (params.media_bidirectional) {
      auto [b, e] = image_of(r, p);
      if (b < e) hi = std::max(hi, e - 1);
    }
    for (int h = 0; h < Hq; h++) {
      const float* q = &d.q[size_t(((p - r.start) * Hq + h) * Dh)];
      const int kvh = h / (Hq / Hkv);
      std::vector<double> s;
      for (int j = lo; j <= hi; j++) {
        double dot = 0;
        for (int i = 0; i < Dh; i++) dot += double(q[i]) * d.k[size_t((j * Hkv + kvh) * Dh + i)];
        s.push_back(dot * params.scale);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int j = lo; j <= hi; j++)
        for (int i = 0; i < Dh; i++)
          out[size_t(((p - r.start) * Hq + h) * Dh + i)] +=
              s[size_t(j - lo)] / sum * d.v[size_t((j * Hkv + kvh) * Dh + i)];
    }
  }
  return out;
}

struct MediaProblem {
  std::vector<MediaRow> rows;
  std::vector<RowData> data;
  int num_blocks = 0;
};

MediaProblem make_problem(std::mt19937& rng, std::vector<MediaRow> rows) {
  MediaProblem pr;
  pr.rows = std::move(rows);
  for (const MediaRow& r : pr.rows) pr.num_blocks += (r.end + kBlock - 1) / kBlock;
  pr.num_blocks += 2;
  const std::vector<int32_t> ids = test::shuffled_ids(rng, pr.num_blocks);
  size_t next = 0;
  for (const MediaRow& r : pr.rows) {
    RowData d;
    for (int i = 0; i < (r.end + kBlock - 1) / kBlock; i++) d.blocks.push_back(ids[next++]);
    d.k = test::random_vec(rng, size_t(r.end * Hkv * Dh), -2.f, 2.f);
    d.v = test::random_vec(rng, size_t(r.end * Hkv * Dh));
    d.q = test::random_vec(rng, size_t((r.end - r.start) * Hq * Dh), -2.f, 2.f);
    pr.data.push_back(std::move(d));
  }
  return pr;
}

// Writes positions [from, to) of each listed row into `cache` and, when `q_out`, runs
// attention for them; returns each listed row's output.
std::vector<std::vector<float>> run(Backend& be, const MediaProblem& pr,
                                    const std::vector<int>& order, const AttentionParams& params) {
  PagedKv cache{be.zeros(DType::F32, {pr.num_blocks, kBlock, Hkv, Dh}),
                be.zeros(DType::F32, {pr.num_blocks, kBlock, Hkv, Dh})};
  const int kv_row = Hkv * Dh;
  auto write = [&](bool prefix) {
    std::vector<test::RowSpec> specs;
    std::vector<float> k, v;
    for (int b : order) {
      const MediaRow& r = pr.rows[size_t(b)];
      const int from = prefix ? 0 : r.start, to = prefix ? r.start : r.end;
      if (to <= from) continue;
      specs.push_back(test::row_range(from, to - from, pr.data[size_t(b)].blocks));
      k.insert(k.end(), pr.data[size_t(b)].k.begin() + from * kv_row,
               pr.data[size_t(b)].k.begin() + to * kv_row);
      v.insert(v.end(), pr.data[size_t(b)].v.begin() + from * kv_row,
               pr.data[size_t(b)].v.begin() + to * kv_row);
    }
    if (specs.empty()) return StepTensors{};
    StepTensors step = test::build_step(be, specs, kBlock);
    const int T = step.num_tokens;
    be.write_kv(cache, device_f32(be, k, {T, Hkv, Dh}), device_f32(be, v, {T, Hkv, Dh}), step);
    return step;
  };
  write(true);
  StepTensors step = write(false);
  std::vector<float> q;
  std::vector<int32_t> ends;
  for (int b : order) {
    const MediaRow& r = pr.rows[size_t(b)];
    q.insert(q.end(), pr.data[size_t(b)].q.begin(), pr.data[size_t(b)].q.end());
    for (int p = r.start; p < r.end; p++) ends.push_back(image_of(r, p).second);
  }
  const int T = step.num_tokens;
  step.media_ends = device_i32(be, ends, {T});
  Tensor out = be.alloc(DType::F32, {T, Hq, Dh});
  be.attention(out, device_f32(be, q, {T, Hq, Dh}), cache, step, params);
  const std::vector<float> all = to_vec(be, out);
  std::vector<std::vector<float>> per_row(pr.rows.size());
  size_t t0 = 0;
  for (int b : order) {
    const size_t n = size_t(pr.rows[size_t(b)].end - pr.rows[size_t(b)].start) * Hq * Dh;
    per_row[size_t(b)].assign(all.begin() + long(t0), all.begin() + long(t0 + n));
    t0 += n;
  }
  return per_row;
}

// A prompt holding two images (one longer than the window: its late tokens do not see its
// first ones), a chunk over a cached prefix holding a whole image, a decode row, and a row
// that is one image alone.
const std::vector<MediaRow> kRows = {
    {0, 60, {{5, 25}, {30, 34}}}, {20, 45, {{28, 40}}}, {40, 41, {}}, {0, 16, {{0, 16}}}};

TEST(CpuAttentionMedia, ImageTokensSeeTheRestOfTheirImageAndTheWindowCutsThePast) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const MediaProblem pr = make_problem(rng, kRows);
    for (int window : {0, 8}) {
      AttentionParams params{.scale = 0.25f, .window = window, .media_bidirectional = true};
      const auto got = run(*be, pr, {0, 1, 2, 3}, params);
      for (size_t b = 0; b < kRows.size(); b++)
        EXPECT_LE(rel_err(got[b], reference(kRows[b], pr.data[b], params)), test::kTol)
            << "row " << b << " window " << window;
    }
  }
}

TEST(CpuAttentionMedia, LayersThatDoNotAskStayCausal) {
  auto be = make_cpu_backend();
  std::mt19937 rng(7);
  const MediaProblem pr = make_problem(rng, kRows);
  AttentionParams causal{.scale = 0.25f, .window = 8};
  AttentionParams widened = causal;
  widened.media_bidirectional = true;
  const auto got = run(*be, pr, {0, 1, 2, 3}, causal);
  for (size_t b = 0; b < kRows.size(); b++)
    EXPECT_LE(rel_err(got[b], reference(kRows[b], pr.data[b], causal)), test::kTol) << "row " << b;
  // The widened reference differs (the test can fail): image tokens do see later keys.
  EXPECT_GT(rel_err(got[0], reference(kRows[0], pr.data[0], widened)), 1e-3);
}

TEST(CpuAttentionMedia, RowOutputIsIndependentOfTheOtherRows) {
  auto be = make_cpu_backend();
  std::mt19937 rng(3);
  const MediaProblem pr = make_problem(rng, kRows);
  AttentionParams params{.scale = 0.25f, .window = 8, .media_bidirectional = true};
  const auto together = run(*be, pr, {3, 1, 0, 2}, params);
  for (int b = 0; b < int(kRows.size()); b++)
    EXPECT_EQ(run(*be, pr, {b}, params)[size_t(b)], together[size_t(b)]) << "row " << b;
}

TEST(CpuAttentionMedia, RefusesEndsBeforeTheirTokenOrPastTheContext) {
  auto be = make_cpu_backend();
  std::mt19937 rng(5);
  const MediaProblem pr = make_problem(rng, {{0, 20, {}}});
  AttentionParams params{.scale = 1.f, .media_bidirectional = true};
  StepTensors step = test::build_step(*be, {test::row_range(0, 20, pr.data[0].blocks)}, kBlock);
  PagedKv cache{be->zeros(DType::F32, {pr.num_blocks, kBlock, Hkv, Dh}),
                be->zeros(DType::F32, {pr.num_blocks, kBlock, Hkv, Dh})};
  Tensor q = be->zeros(DType::F32, {20, Hq, Dh}), out = be->alloc(DType::F32, {20, Hq, Dh});
  std::vector<int32_t> ends(20, 0);
  ends[3] = 30;  // token 3's image ends past the context (20)
  step.media_ends = device_i32(*be, ends, {20});
  EXPECT_THROW(be->attention(out, q, cache, step, params), Error);
  ends[3] = 3;  // ends at position 3 itself: does not hold it
  step.media_ends = device_i32(*be, ends, {20});
  EXPECT_THROW(be->attention(out, q, cache, step, params), Error);
  ends[3] = 10;
  step.media_ends = device_i32(*be, ends, {20});
  EXPECT_NO_THROW(be->attention(out, q, cache, step, params));
}

}  // namespace cpu_attention_media_test
}  // namespace tandem
