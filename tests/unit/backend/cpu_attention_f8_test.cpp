// write_kv and paged attention over an f8_e4m3 KV cache. The op's arithmetic is checked
// apart from the rounding: an f8 cache must give exactly the output of an f32 cache that
// holds the same K/V rounded through f8 beforehand. The rounding itself is checked to be
// sane against the unrounded f32 cache. GQA, sliding windows, softcapping and rows of
// different lengths share each step; block tables are shuffled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/dtype.h"
#include "core/error.h"
#include "step_builder.h"

namespace tandem {
namespace cpu_attention_f8_test {

using test::device_f32;
using test::RowSpec;
using test::to_vec;

constexpr int kBlock = 16;

struct Geometry {
  int Hq, Hkv, Dh;
  AttentionParams params;
};

// Per-row K/V over the whole context and the queries of the last num_new positions.
struct Rows {
  std::vector<int> context, num_new;
  std::vector<std::vector<int32_t>> blocks;  // per row
  std::vector<float> k, v;                   // rows concatenated: [Σ context, Hkv, Dh]
  std::vector<float> q;                      // rows concatenated: [Σ num_new, Hq, Dh]
  int num_blocks = 0;
};

Rows make_rows(std::mt19937& rng, const Geometry& g, std::vector<std::pair<int, int>> shape) {
  Rows r;
  for (auto [context, num_new] : shape) {
    r.context.push_back(context);
    r.num_new.push_back(num_new);
    r.num_blocks += (context + kBlock - 1) / kBlock;
  }
  r.num_blocks += 2;
  const std::vector<int32_t> ids = test::shuffled_ids(rng, r.num_blocks);
  size_t next = 0;
  for (int context : r.context) {
    std::vector<int32_t> table;
    for (int i = 0; i < (context + kBlock - 1) / kBlock; i++) table.push_back(ids[next++]);
    r.blocks.push_back(table);
    auto k = test::random_vec(rng, size_t(context * g.Hkv * g.Dh), -3.f, 3.f);
    auto v = test::random_vec(rng, size_t(context * g.Hkv * g.Dh), -1.f, 1.f);
    r.k.insert(r.k.end(), k.begin(), k.end());
    r.v.insert(r.v.end(), v.begin(), v.end());
  }
  for (int n : r.num_new) {
    auto q = test::random_vec(rng, size_t(n * g.Hq * g.Dh), -2.f, 2.f);
    r.q.insert(r.q.end(), q.begin(), q.end());
  }
  return r;
}

std::vector<float> rounded_through_f8(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = f8e4m3_to_f32(f32_to_f8e4m3(x[i]));
  return out;
}

// Writes every row's whole context (one step), then attends from the last num_new
// positions of each row (the next step) over a cache of `dtype`.   → [Σ num_new, Hq, Dh]
std::vector<float> attend(Backend& be, const Geometry& g, const Rows& r, DType dtype,
                          const std::vector<float>& k, const std::vector<float>& v) {
  Shape shape{r.num_blocks, kBlock, g.Hkv, g.Dh};
  PagedKv cache{be.zeros(dtype, shape), be.zeros(dtype, shape)};
  std::vector<RowSpec> write_rows, query_rows;
  for (size_t b = 0; b < r.context.size(); b++) {
    write_rows.push_back(test::row_range(0, r.context[b], r.blocks[b]));
    query_rows.push_back(test::row_range(r.context[b] - r.num_new[b], r.num_new[b], r.blocks[b]));
  }
  StepTensors write = test::build_step(be, write_rows, kBlock);
  const int W = write.num_tokens;
  be.write_kv(cache, device_f32(be, k, {W, g.Hkv, g.Dh}), device_f32(be, v, {W, g.Hkv, g.Dh}),
              write);
  StepTensors step = test::build_step(be, query_rows, kBlock);
  const int T = step.num_tokens;
  Tensor out = be.alloc(DType::F32, {T, g.Hq, g.Dh});
  be.attention(out, device_f32(be, r.q, {T, g.Hq, g.Dh}), cache, step, g.params);
  return to_vec(be, out);
}

// A decode row, a fresh prefill, a chunk over a cached prefix, a row over several blocks.
const std::vector<std::pair<int, int>> kMixedRows = {{41, 1}, {7, 7}, {25, 5}, {70, 3}};

TEST(CpuAttentionF8, EqualsAnF32CacheHoldingTheRoundedValues) {
  auto be = make_cpu_backend();
  double worst_vs_unrounded = 0;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [Hq, Hkv] : {std::pair{4, 4}, {8, 2}})
      for (int Dh : {16, 64})
        for (int window : {0, 5})
          for (float softcap : {0.f, 1.f}) {
            SCOPED_TRACE(testing::Message() << "Hq=" << Hq << " Hkv=" << Hkv << " Dh=" << Dh
                                            << " window=" << window << " softcap=" << softcap);
            const Geometry g{Hq, Hkv, Dh, {float(1 / std::sqrt(double(Dh))), softcap, window}};
            const Rows r = make_rows(rng, g, kMixedRows);
            const auto f8 = attend(*be, g, r, DType::F8E4M3, r.k, r.v);
            const auto f32_rounded =
                attend(*be, g, r, DType::F32, rounded_through_f8(r.k), rounded_through_f8(r.v));
            EXPECT_EQ(f8, f32_rounded);
            const double err = test::rel_err(f8, attend(*be, g, r, DType::F32, r.k, r.v));
            EXPECT_LE(err, 0.1);
            worst_vs_unrounded = std::max(worst_vs_unrounded, err);
          }
  }
  std::cout << "[ measured ] f8 vs unrounded f32 cache: worst relative error " << worst_vs_unrounded
            << "\n";
}

// With few jobs per thread the f8 path splits a kv head's query heads over jobs, with
// many it reads each row once for all of them: both give the same bits.
TEST(CpuAttentionF8, ThreadCountAndHeadGroupingDoNotChangeTheOutput) {
  ThreadPool one(1), four(4);
  CpuBackend serial(&one), threaded(&four);
  std::mt19937 rng(5);
  const Geometry g{8, 2, 64, {0.125f, 0.f, 0}};
  for (const auto& shape : {std::vector<std::pair<int, int>>{{41, 1}},  // 1 token x 2 kv heads
                            {{41, 1}, {7, 7}, {25, 5}, {70, 3}, {16, 16}}}) {
    const Rows r = make_rows(rng, g, shape);
    const auto want =
        attend(serial, g, r, DType::F32, rounded_through_f8(r.k), rounded_through_f8(r.v));
    EXPECT_EQ(attend(serial, g, r, DType::F8E4M3, r.k, r.v), want);
    EXPECT_EQ(attend(threaded, g, r, DType::F8E4M3, r.k, r.v), want);
  }
}

TEST(CpuWriteKvF8, StoresEachValueRoundedInItsSlotOnly) {
  auto be = make_cpu_backend();
  std::mt19937 rng(3);
  const int NB = 4, Hkv = 2, Dh = 8, row = Hkv * Dh;
  PagedKv cache{be->zeros(DType::F8E4M3, {NB, kBlock, Hkv, Dh}),
                be->zeros(DType::F8E4M3, {NB, kBlock, Hkv, Dh})};
  // Positions 15..16 of a row whose table is {2, 0}: slots 2*16+15 and 0.
  StepTensors step = test::build_step(*be, {test::row_range(15, 2, {2, 0})}, kBlock);
  auto k = test::random_vec(rng, 2 * row, -600.f, 600.f);  // some saturate
  auto v = test::random_vec(rng, 2 * row, -0.01f, 0.01f);  // some are subnormal
  be->write_kv(cache, device_f32(*be, k, {2, Hkv, Dh}), device_f32(*be, v, {2, Hkv, Dh}), step);
  const std::vector<int> slots = {47, 0};
  const uint8_t* ck = cache.k.ptr<uint8_t>();
  const uint8_t* cv = cache.v.ptr<uint8_t>();
  for (int s = 0; s < NB * kBlock; s++) {
    const auto it = std::find(slots.begin(), slots.end(), s);
    const size_t t = size_t(it - slots.begin());
    for (int i = 0; i < row; i++) {
      const uint8_t want_k = it == slots.end() ? 0 : f32_to_f8e4m3(k[t * row + size_t(i)]);
      const uint8_t want_v = it == slots.end() ? 0 : f32_to_f8e4m3(v[t * row + size_t(i)]);
      ASSERT_EQ(ck[s * row + i], want_k) << "slot " << s;
      ASSERT_EQ(cv[s * row + i], want_v) << "slot " << s;
    }
  }
}

// The Backend's default qkv_to_cache (split, RoPE, write_kv) into an f8 cache stores the
// f8 rounding of what it stores into an f32 cache, and gives the same q.
TEST(CpuWriteKvF8, QkvToCacheRoundsWhatItStores) {
  auto be = make_cpu_backend();
  std::mt19937 rng(11);
  const int T = 5, Hq = 4, Hkv = 2, Dh = 16, NB = 3;
  StepTensors step = test::build_step(*be, {test::row_range(3, T, {1, 2})}, kBlock);
  Tensor qkv = device_f32(*be, test::random_vec(rng, size_t(T * (Hq + 2 * Hkv) * Dh), -4.f, 4.f),
                          {T, (Hq + 2 * Hkv) * Dh});
  RopeSpec rope;
  rope.rotary_dim = Dh;
  for (int i = 0; i < Dh / 2; i++) rope.inv_freq.push_back(std::pow(10000.f, -2.f * i / Dh));
  auto run = [&](DType dtype, std::vector<float>& q_out) {
    PagedKv cache{be->zeros(dtype, {NB, kBlock, Hkv, Dh}), be->zeros(dtype, {NB, kBlock, Hkv, Dh})};
    Tensor q = be->alloc(DType::F32, {T, Hq, Dh});
    be->qkv_to_cache(q, qkv, cache, step, rope, QkNorm{});
    q_out = to_vec(*be, q);
    return std::pair{to_vec(*be, cache.k), to_vec(*be, cache.v)};
  };
  std::vector<float> q8, q32;
  const auto [k8, v8] = run(DType::F8E4M3, q8);
  const auto [k32, v32] = run(DType::F32, q32);
  EXPECT_EQ(q8, q32);
  EXPECT_EQ(k8, rounded_through_f8(k32));
  EXPECT_EQ(v8, rounded_through_f8(v32));
}

TEST(CpuAttentionF8, RejectsCachesItCannotRead) {
  auto be = make_cpu_backend();
  const Shape shape{2, kBlock, 1, 16};
  StepTensors step = test::build_step(*be, {test::row_range(0, 1, {0})}, kBlock);
  Tensor q = be->zeros(DType::F32, {1, 1, 16}), out = be->alloc(DType::F32, {1, 1, 16});
  Tensor k = be->zeros(DType::F32, {1, 1, 16});
  auto message_of = [&](PagedKv cache) -> std::string {
    try {
      be->attention(out, q, cache, step, AttentionParams{});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // A host bf16 tensor: a dtype the CPU backend never stores a KV cache in.
  PagedKv bf16{Tensor::empty_host(DType::BF16, shape), Tensor::empty_host(DType::BF16, shape)};
  const std::string why = message_of(bf16);
  EXPECT_NE(why.find("bf16"), std::string::npos) << why;
  EXPECT_NE(why.find("f8_e4m3"), std::string::npos) << why;
  EXPECT_THROW(be->write_kv(bf16, k, k, step), Error);
  // K and V of different dtypes.
  PagedKv mixed{be->zeros(DType::F32, shape), be->zeros(DType::F8E4M3, shape)};
  EXPECT_NE(message_of(mixed), "");
  EXPECT_THROW(be->write_kv(mixed, k, k, step), Error);
}

}  // namespace cpu_attention_f8_test
}  // namespace tandem
