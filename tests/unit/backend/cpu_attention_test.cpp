// write_kv and paged attention against a naive double loop over each row's dense K/V,
// with shuffled non-contiguous block tables, GQA, sliding windows, softcapping and rows
// of different lengths in one step; plus the row-invariance gate: a row's output is
// bit-identical whatever rows share its step, in whatever order, on however many threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "step_builder.h"

namespace tandem {
namespace cpu_attention_test {

using test::device_f32;
using test::kTol;
using test::rel_err;
using test::RowSpec;
using test::to_vec;

constexpr int kBlock = 16;

struct AttnRow {
  int context;  // K/V positions 0..context-1 exist once the step has written its own
  int num_new;  // the last num_new of them are this step's query tokens
};

// One attention problem: geometry, per-row block tables and dense per-row data.
struct Problem {
  int Hq, Hkv, Dh;
  AttentionParams params;
  std::vector<AttnRow> rows;
  int num_blocks = 0;
  std::vector<std::vector<int32_t>> blocks;  // per row
  std::vector<std::vector<float>> k, v;      // per row [context, Hkv, Dh]
  std::vector<std::vector<float>> q;         // per row [num_new, Hq, Dh]
};

Problem make_problem(std::mt19937& rng, int Hq, int Hkv, int Dh, AttentionParams params,
                     std::vector<AttnRow> rows) {
  Problem pr;
  pr.Hq = Hq;
  pr.Hkv = Hkv;
  pr.Dh = Dh;
  pr.params = params;
  pr.rows = std::move(rows);
  int needed = 0;
  for (const auto& r : pr.rows) needed += (r.context + kBlock - 1) / kBlock;
  pr.num_blocks = needed + 3;  // spare blocks stay unused (and zero)
  const std::vector<int32_t> ids = test::shuffled_ids(rng, pr.num_blocks);
  size_t next = 0;
  for (const auto& r : pr.rows) {
    std::vector<int32_t> table;
    for (int i = 0; i < (r.context + kBlock - 1) / kBlock; i++) table.push_back(ids[next++]);
    pr.blocks.push_back(table);
    pr.k.push_back(test::random_vec(rng, size_t(r.context * Hkv * Dh), -2.f, 2.f));
    pr.v.push_back(test::random_vec(rng, size_t(r.context * Hkv * Dh)));
    pr.q.push_back(test::random_vec(rng, size_t(r.num_new * Hq * Dh), -2.f, 2.f));
  }
  return pr;
}

// Rows [begin, end) of a row-major array with `width` values per row.
std::vector<float> slice(const std::vector<float>& a, int begin, int end, int width) {
  return std::vector<float>(a.begin() + long(begin) * width, a.begin() + long(end) * width);
}

// Writes the K/V of every row's earlier positions into a fresh cache (a previous step).
PagedKv prefilled_cache(Backend& be, const Problem& pr) {
  const int row = pr.Hkv * pr.Dh;
  PagedKv cache{be.zeros(DType::F32, {pr.num_blocks, kBlock, pr.Hkv, pr.Dh}),
                be.zeros(DType::F32, {pr.num_blocks, kBlock, pr.Hkv, pr.Dh})};
  std::vector<RowSpec> specs;
  std::vector<float> k, v;
  for (size_t b = 0; b < pr.rows.size(); b++) {
    const int old = pr.rows[b].context - pr.rows[b].num_new;
    specs.push_back(test::row_range(0, old, pr.blocks[b]));
    auto kb = slice(pr.k[b], 0, old, row), vb = slice(pr.v[b], 0, old, row);
    k.insert(k.end(), kb.begin(), kb.end());
    v.insert(v.end(), vb.begin(), vb.end());
  }
  StepTensors step = test::build_step(be, specs, kBlock);
  const int T = step.num_tokens;
  be.write_kv(cache, device_f32(be, k, {T, pr.Hkv, pr.Dh}), device_f32(be, v, {T, pr.Hkv, pr.Dh}),
              step);
  return cache;
}

// Runs one step holding the rows `order` (a subset, any order): write_kv of the new
// tokens, then attention. Returns each row's output [num_new, Hq, Dh], indexed by row.
std::vector<std::vector<float>> run_step(Backend& be, const Problem& pr,
                                         const std::vector<int>& order) {
  PagedKv cache = prefilled_cache(be, pr);
  const int kv_row = pr.Hkv * pr.Dh, q_row = pr.Hq * pr.Dh;
  std::vector<RowSpec> specs;
  std::vector<float> q, k, v;
  for (int b : order) {
    const AttnRow& r = pr.rows[size_t(b)];
    specs.push_back(test::row_range(r.context - r.num_new, r.num_new, pr.blocks[size_t(b)]));
    q.insert(q.end(), pr.q[size_t(b)].begin(), pr.q[size_t(b)].end());
    auto kb = slice(pr.k[size_t(b)], r.context - r.num_new, r.context, kv_row);
    auto vb = slice(pr.v[size_t(b)], r.context - r.num_new, r.context, kv_row);
    k.insert(k.end(), kb.begin(), kb.end());
    v.insert(v.end(), vb.begin(), vb.end());
  }
  StepTensors step = test::build_step(be, specs, kBlock);
  const int T = step.num_tokens;
  be.write_kv(cache, device_f32(be, k, {T, pr.Hkv, pr.Dh}), device_f32(be, v, {T, pr.Hkv, pr.Dh}),
              step);
  Tensor out = be.alloc(DType::F32, {T, pr.Hq, pr.Dh});
  be.attention(out, device_f32(be, q, {T, pr.Hq, pr.Dh}), cache, step, pr.params);
  const auto all = to_vec(be, out);
  std::vector<std::vector<float>> per_row(pr.rows.size());
  int t0 = 0;
  for (int b : order) {
    const int n = pr.rows[size_t(b)].num_new;
    per_row[size_t(b)] = slice(all, t0, t0 + n, q_row);
    t0 += n;
  }
  return per_row;
}

// Naive attention of row b's new tokens over its dense K/V, in double.
std::vector<double> attention_ref(const Problem& pr, int b) {
  const AttnRow& r = pr.rows[size_t(b)];
  const auto& K = pr.k[size_t(b)];
  const auto& V = pr.v[size_t(b)];
  const int Dh = pr.Dh, group = pr.Hq / pr.Hkv, window = pr.params.window;
  std::vector<double> out(size_t(r.num_new * pr.Hq * Dh));
  for (int i = 0; i < r.num_new; i++) {
    const int p = r.context - r.num_new + i;
    const int lo = window > 0 ? std::max(0, p - window + 1) : 0;
    for (int h = 0; h < pr.Hq; h++) {
      const float* qv = &pr.q[size_t(b)][size_t((i * pr.Hq + h) * Dh)];
      const int kvh = h / group;
      std::vector<double> s;
      for (int j = lo; j <= p; j++) {
        double dot = 0;
        for (int d = 0; d < Dh; d++) dot += double(qv[d]) * K[size_t((j * pr.Hkv + kvh) * Dh + d)];
        dot *= pr.params.scale;
        if (pr.params.softcap > 0) dot = pr.params.softcap * std::tanh(dot / pr.params.softcap);
        s.push_back(dot);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int j = lo; j <= p; j++)
        for (int d = 0; d < Dh; d++)
          out[size_t((i * pr.Hq + h) * Dh + d)] +=
              s[size_t(j - lo)] / sum * V[size_t((j * pr.Hkv + kvh) * Dh + d)];
    }
  }
  return out;
}

std::vector<int> all_rows(const Problem& pr) {
  std::vector<int> order(pr.rows.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = int(i);
  return order;
}

void expect_matches_reference(Backend& be, const Problem& pr) {
  const auto got = run_step(be, pr, all_rows(pr));
  for (size_t b = 0; b < pr.rows.size(); b++)
    EXPECT_LE(rel_err(got[b], attention_ref(pr, int(b))), kTol) << "row " << b;
}

// A decode row at position 40, a fresh prefill 0..6, a chunk 20..24 over a cached
// prefix, and a longer row crossing several blocks.
const std::vector<AttnRow> kMixedRows = {{41, 1}, {7, 7}, {25, 5}, {70, 3}};

TEST(CpuAttention, MatchesNaiveOverGqaHeadDimsWindowsAndSoftcap) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [Hq, Hkv] : {std::pair{4, 4}, {4, 2}, {8, 2}})
      for (int Dh : {16, 24, 64})
        for (int window : {0, 5, 200})
          for (float softcap : {0.f, 1.f}) {
            SCOPED_TRACE(testing::Message() << "Hq=" << Hq << " Hkv=" << Hkv << " Dh=" << Dh
                                            << " window=" << window << " softcap=" << softcap);
            AttentionParams params{float(1 / std::sqrt(double(Dh))), softcap, window};
            expect_matches_reference(*be, make_problem(rng, Hq, Hkv, Dh, params, kMixedRows));
          }
  }
}

TEST(CpuAttention, SingleTokenSteps) {
  auto be = make_cpu_backend();
  std::mt19937 rng(31);
  AttentionParams params{0.25f, 0.f, 0};
  expect_matches_reference(*be, make_problem(rng, 2, 1, 16, params, {{1, 1}}));
  expect_matches_reference(*be, make_problem(rng, 4, 2, 64, params, {{33, 1}}));
  params.window = 1;  // sees only itself: the output is its own V
  Problem pr = make_problem(rng, 2, 2, 16, params, {{20, 1}});
  const auto got = run_step(*be, pr, {0});
  EXPECT_EQ(got[0], slice(pr.v[0], 19, 20, 2 * 16));
}

TEST(CpuAttention, RowOutputIsIndependentOfTheOtherRows) {
  ThreadPool one(1), four(4);
  CpuBackend serial(&one), threaded(&four);
  std::mt19937 rng(99);
  AttentionParams params{0.125f, 0.f, 0};
  const Problem pr =
      make_problem(rng, 8, 2, 64, params, {{41, 1}, {7, 7}, {25, 5}, {70, 3}, {16, 16}});
  const auto full = run_step(serial, pr, {0, 1, 2, 3, 4});
  for (const std::vector<int>& order :
       {std::vector<int>{4, 3, 2, 1, 0}, {2, 0}, {3}, {1}, {0, 4, 1}, {3, 1, 4, 2, 0}}) {
    const auto part = run_step(serial, pr, order);
    for (int b : order) EXPECT_EQ(part[size_t(b)], full[size_t(b)]) << "row " << b;
  }
  EXPECT_EQ(run_step(threaded, pr, {0, 1, 2, 3, 4}), full);
  EXPECT_EQ(run_step(threaded, pr, {3, 0}), (run_step(serial, pr, {3, 0})));
}

// Row b of pr as a step that computes only its positions [first, first + n): the same
// K/V and queries, with the context cut at first + n.
Problem sub_step(const Problem& pr, int b, int first, int n) {
  Problem sub = pr;
  const int kv_row = pr.Hkv * pr.Dh, q_row = pr.Hq * pr.Dh;
  const AttnRow& r = pr.rows[size_t(b)];
  const int q0 = first - (r.context - r.num_new);
  sub.rows = {{first + n, n}};
  sub.blocks = {pr.blocks[size_t(b)]};
  sub.k = {slice(pr.k[size_t(b)], 0, first + n, kv_row)};
  sub.v = {slice(pr.v[size_t(b)], 0, first + n, kv_row)};
  sub.q = {slice(pr.q[size_t(b)], q0, q0 + n, q_row)};
  return sub;
}

// Long prompts: jobs of several token tiles, causal tiles across many blocks, queries that
// see part of a tile (the diagonal, a window's edge).
TEST(CpuAttention, LongPrefillChunksMatchNaive) {
  auto be = make_cpu_backend();
  std::mt19937 rng(5);
  for (int window : {0, 21})
    for (auto [Hq, Hkv, Dh] : {std::tuple{6, 2, 64}, {4, 1, 40}, {2, 2, 128}}) {
      SCOPED_TRACE(testing::Message() << "Hq=" << Hq << " Dh=" << Dh << " window=" << window);
      AttentionParams params{float(1 / std::sqrt(double(Dh))), 0.f, window};
      expect_matches_reference(*be, make_problem(rng, Hq, Hkv, Dh, params, {{100, 100}, {90, 37}, {33, 1}}));
    }
}

// A token's output does not depend on how its row's positions are split into steps: one
// 70-token prefill, chunks of 13 and 57, or one decode step per token give the same bits.
TEST(CpuAttention, TokenOutputIsTheSameInPrefillChunksAndDecodeSteps) {
  auto be = make_cpu_backend();
  std::mt19937 rng(77);
  for (int window : {0, 9})
    for (float softcap : {0.f, 2.f}) {
      SCOPED_TRACE(testing::Message() << "window=" << window << " softcap=" << softcap);
      AttentionParams params{0.125f, softcap, window};
      const Problem pr = make_problem(rng, 6, 2, 64, params, {{70, 70}});
      const int q_row = pr.Hq * pr.Dh;
      const auto whole = run_step(*be, pr, {0})[0];
      auto expect_part = [&](int first, int n) {
        const auto part = run_step(*be, sub_step(pr, 0, first, n), {0})[0];
        EXPECT_EQ(part, slice(whole, first, first + n, q_row)) << "positions " << first << "+" << n;
      };
      expect_part(0, 13);
      expect_part(13, 57);
      for (int p : {0, 1, 15, 16, 17, 40, 69}) expect_part(p, 1);
    }
}

// Both instruction sets compute the same arithmetic lane by lane: the same bits.
TEST(CpuAttention, Avx2AndAvx512GiveTheSameBits) {
  if (cpu_max_isa() < CpuIsa::Avx512) GTEST_SKIP() << "this cpu has no AVX-512";
  ThreadPool one(1);
  CpuBackend avx2(&one, CpuIsa::Avx2), avx512(&one, CpuIsa::Avx512);
  std::mt19937 rng(8);
  for (auto [Hq, Hkv, Dh] : {std::tuple{8, 2, 64}, {4, 4, 24}, {3, 1, 100}}) {
    AttentionParams params{0.2f, Dh == 24 ? 1.5f : 0.f, Dh == 100 ? 30 : 0};
    const Problem pr = make_problem(rng, Hq, Hkv, Dh, params, {{41, 1}, {50, 50}, {25, 5}});
    EXPECT_EQ(run_step(avx2, pr, all_rows(pr)), run_step(avx512, pr, all_rows(pr)))
        << "Hq=" << Hq << " Dh=" << Dh;
  }
}

TEST(CpuWriteKv, WritesEachTokenIntoItsSlotOnly) {
  auto be = make_cpu_backend();
  std::mt19937 rng(2);
  const int NB = 5, Hkv = 2, Dh = 8, row = Hkv * Dh;
  PagedKv cache{be->zeros(DType::F32, {NB, kBlock, Hkv, Dh}),
                be->zeros(DType::F32, {NB, kBlock, Hkv, Dh})};
  // Positions 14..17 of a row whose table is {3, 1}: slots 3*16+14, 3*16+15, 16, 17.
  StepTensors step = test::build_step(*be, {test::row_range(14, 4, {3, 1})}, kBlock);
  auto k = test::random_vec(rng, 4 * row), v = test::random_vec(rng, 4 * row);
  be->write_kv(cache, device_f32(*be, k, {4, Hkv, Dh}), device_f32(*be, v, {4, Hkv, Dh}), step);
  const std::vector<int> slots = {62, 63, 16, 17};
  const auto ck = to_vec(*be, cache.k), cv = to_vec(*be, cache.v);
  for (int s = 0; s < NB * kBlock; s++) {
    const auto it = std::find(slots.begin(), slots.end(), s);
    const int t = int(it - slots.begin());
    for (int i = 0; i < row; i++) {
      const float want_k = it == slots.end() ? 0.f : k[size_t(t * row + i)];
      const float want_v = it == slots.end() ? 0.f : v[size_t(t * row + i)];
      ASSERT_EQ(ck[size_t(s * row + i)], want_k) << "slot " << s;
      ASSERT_EQ(cv[size_t(s * row + i)], want_v) << "slot " << s;
    }
  }
  StepTensors bad = test::build_step(*be, {test::row_range(0, 1, {NB})}, kBlock);
  EXPECT_THROW(be->write_kv(cache, device_f32(*be, slice(k, 0, 1, row), {1, Hkv, Dh}),
                            device_f32(*be, slice(v, 0, 1, row), {1, Hkv, Dh}), bad),
               Error);
}

TEST(CpuAttention, RejectsBadStepsAndShapes) {
  auto be = make_cpu_backend();
  PagedKv cache{be->zeros(DType::F32, {4, kBlock, 2, 16}),
                be->zeros(DType::F32, {4, kBlock, 2, 16})};
  Tensor q = be->zeros(DType::F32, {1, 4, 16}), out = be->alloc(DType::F32, {1, 4, 16});
  AttentionParams params{0.25f, 0.f, 0};
  // A block id past the pool.
  StepTensors bad_block = test::build_step(*be, {test::row_range(17, 1, {0, 9})}, kBlock);
  EXPECT_THROW(be->attention(out, q, cache, bad_block, params), Error);
  // Three query heads cannot share two kv heads.
  StepTensors ok = test::build_step(*be, {test::row_range(3, 1, {2})}, kBlock);
  Tensor q3 = be->zeros(DType::F32, {1, 3, 16}), out3 = be->alloc(DType::F32, {1, 3, 16});
  EXPECT_THROW(be->attention(out3, q3, cache, ok, params), Error);
  // A head dim that is not the cache's.
  Tensor q8 = be->zeros(DType::F32, {1, 4, 8}), out8 = be->alloc(DType::F32, {1, 4, 8});
  EXPECT_THROW(be->attention(out8, q8, cache, ok, params), Error);
  // A position past the row's context length.
  int32_t short_ctx = 2;
  be->write_i32(ok.context_lens, &short_ctx, 1);
  EXPECT_THROW(be->attention(out, q, cache, ok, params), Error);
}

}  // namespace cpu_attention_test
}  // namespace tandem
