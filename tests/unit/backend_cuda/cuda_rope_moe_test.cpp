// CUDA rope, topk_route and moe_experts against their CPU twins on fresh random inputs,
// plus the allocator's steady state over a whole MoE block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "../backend/step_builder.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace {

using test::kBf16Tol;
using test::put;
using test::rel_err_between;

StepTensors positions_step(Backend& be, const std::vector<std::vector<int32_t>>& rows) {
  std::vector<test::RowSpec> specs;
  for (const auto& p : rows) specs.push_back({p, std::vector<int32_t>(512, 0)});
  return test::build_step(be, specs);
}

TEST(CudaRope, MatchesCpuIncludingPartialRotaryAndDynamicNtk) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  // A decode row far out, a prefill row from 0, a chunk crossing the original context (32).
  std::vector<int32_t> prefill(40);
  std::iota(prefill.begin(), prefill.end(), 0);
  const std::vector<std::vector<int32_t>> rows = {{5000}, prefill, {29, 30, 31}, {30, 31, 32, 33}};
  StepTensors step_c = positions_step(*be.cpu, rows), step_g = positions_step(*be.gpu, rows);
  const int64_t T = step_c.num_tokens;
  std::mt19937 rng(37);
  struct Case {
    int64_t H, Dh;
    int rotary_dim;
    float factor, dynamic;
  };
  for (Case c : {Case{1, 16, 16, 1.f, 0.f}, {4, 64, 64, 1.2f, 0.f}, {3, 64, 32, 1.f, 0.f},
                 {2, 40, 24, 1.f, 0.f}, {2, 128, 128, 1.f, 2.f}, {3, 64, 48, 1.1f, 4.f}}) {
    SCOPED_TRACE(testing::Message() << "H " << c.H << " Dh " << c.Dh << " rd " << c.rotary_dim
                                    << " dynamic " << c.dynamic);
    RopeSpec spec = test::rope_spec(c.rotary_dim, c.factor);
    spec.dynamic_factor = c.dynamic;
    spec.original_max_position = 32;
    auto x = test::random_bf16(rng, size_t(T * c.H * c.Dh));
    Tensor ref = put(*be.cpu, x, {T, c.H, c.Dh});
    be.cpu->rope(ref, step_c, spec);
    Tensor xg = put(*be.gpu, x, {T, c.H, c.Dh});
    be.gpu->rope(xg, step_g, spec);
    EXPECT_LE(rel_err_between(*be.gpu, xg, *be.cpu, ref), kBf16Tol);
    const auto got = test::to_vec(*be.gpu, xg);
    for (int64_t i = 0; i < T * c.H; i++)  // pass-through dims are untouched
      for (int64_t d = c.rotary_dim; d < c.Dh; d++)
        ASSERT_EQ(got[size_t(i * c.Dh + d)], x[size_t(i * c.Dh + d)]);
  }
  Tensor bad = be.gpu->zeros(DType::BF16, {T, 1, 16});
  EXPECT_THROW(be.gpu->rope(bad, step_g, test::rope_spec(32, 1.f)), Error);
}

// qkv_to_cache (one kernel on CUDA) against the CPU's composition of split_columns,
// rms_norm, rope and write_kv: q, and the whole K and V caches (untouched slots included).
TEST(CudaQkvToCache, MatchesTheCpuCompositionWithAndWithoutQkNorms) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(41);
  const int NB = 24, BS = 16;
  std::vector<int32_t> ids = test::shuffled_ids(rng, NB);
  auto blocks = [&](int from, int n) {
    return std::vector<int32_t>(ids.begin() + from, ids.begin() + from + n);
  };
  std::vector<test::RowSpec> rows = {test::row_range(70, 1, blocks(0, 5)),
                                     test::row_range(0, 40, blocks(5, 3)),
                                     test::row_range(29, 3, blocks(8, 2))};
  StepTensors step_c = test::build_step(*be.cpu, rows, BS), step_g = test::build_step(*be.gpu, rows, BS);
  const int64_t T = step_c.num_tokens;
  struct Case {
    int64_t Hq, Hkv, Dh;
    int rotary_dim;
    bool norm, f32_norm;
    float dynamic;
  };
  for (Case c : {Case{4, 2, 64, 64, false, false, 0.f}, {8, 2, 128, 128, true, false, 0.f},
                 {3, 1, 96, 48, true, true, 0.f}, {2, 2, 40, 24, false, false, 0.f},
                 {4, 4, 32, 32, true, false, 2.f}, {16, 8, 256, 128, true, false, 0.f},
                 // the vectorized kernel's other shapes: dynamic NTK, partial rotary at 128
                 {8, 2, 128, 128, true, true, 2.f}, {6, 2, 128, 64, false, false, 0.f}}) {
    SCOPED_TRACE(testing::Message() << "Hq " << c.Hq << " Hkv " << c.Hkv << " Dh " << c.Dh
                                    << " rd " << c.rotary_dim << " norm " << c.norm);
    RopeSpec spec = test::rope_spec(c.rotary_dim, 1.05f);
    spec.dynamic_factor = c.dynamic;
    spec.original_max_position = 32;
    const int64_t W = (c.Hq + 2 * c.Hkv) * c.Dh;
    auto x = test::random_bf16(rng, size_t(T * W), -2.f, 2.f);
    auto wq = test::random_bf16(rng, size_t(c.Dh), 0.5f, 1.5f);
    auto wk = test::random_bf16(rng, size_t(c.Dh), 0.5f, 1.5f);
    const Shape cache_shape{NB, BS, c.Hkv, c.Dh};
    auto run = [&](Backend& b, const StepTensors& step, PagedKv& kv) {
      QkNorm norm;
      if (c.norm) {
        const DType wt = c.f32_norm ? DType::F32 : b.act_dtype();
        norm = {test::put_as(b, wq, {c.Dh}, wt), test::put_as(b, wk, {c.Dh}, wt), 1e-5f, 0.f};
      }
      kv.k = b.zeros(b.act_dtype(), cache_shape);
      kv.v = b.zeros(b.act_dtype(), cache_shape);
      Tensor q = b.alloc(b.act_dtype(), {T, c.Hq, c.Dh});
      b.qkv_to_cache(q, put(b, x, {T, W}), kv, step, spec, norm);
      return q;
    };
    PagedKv kv_c, kv_g;
    Tensor q_c = run(*be.cpu, step_c, kv_c), q_g = run(*be.gpu, step_g, kv_g);
    EXPECT_LE(rel_err_between(*be.gpu, q_g, *be.cpu, q_c), kBf16Tol);
    EXPECT_LE(rel_err_between(*be.gpu, kv_g.k, *be.cpu, kv_c.k), kBf16Tol);
    EXPECT_EQ(test::to_vec(*be.gpu, kv_g.v), test::to_vec(*be.cpu, kv_c.v));  // v is copied
  }
  // Padding tokens (slot -1, as in a replayed decode graph) write no KV.
  StepTensors pad = step_g;
  pad.groups[0].slot_map = test::put_i32(*be.gpu, std::vector<int32_t>(size_t(T), -1), {T});
  PagedKv kv{be.gpu->zeros(DType::BF16, {NB, BS, 1, 32}), be.gpu->zeros(DType::BF16, {NB, BS, 1, 32})};
  Tensor q = be.gpu->alloc(DType::BF16, {T, 2, 32});
  auto x = test::random_bf16(rng, size_t(T * 4 * 32));
  be.gpu->qkv_to_cache(q, put(*be.gpu, x, {T, 4 * 32}), kv, pad, test::rope_spec(32, 1.f), {});
  for (float v : test::to_vec(*be.gpu, kv.k)) ASSERT_EQ(v, 0.f);
  EXPECT_THROW(be.gpu->qkv_to_cache(q, put(*be.gpu, x, {T, 4 * 32}), kv, pad, test::rope_spec(64, 1.f), {}),
               Error);
}

// Gemma 3n/4's shapes of qkv_to_cache, which the CUDA backend composes from its ops (its
// fused kernel has no v norm): an unweighted v norm, and attention_k_eq_v's qkv without a
// v block (V is the raw key projection).
TEST(CudaQkvToCache, GemmaVNormAndKeyAsValueMatchTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(43);
  const int NB = 8, BS = 16;
  std::vector<test::RowSpec> rows = {test::row_range(20, 1, {3, 5}), test::row_range(0, 9, {6})};
  StepTensors step_c = test::build_step(*be.cpu, rows, BS), step_g = test::build_step(*be.gpu, rows, BS);
  const int64_t T = step_c.num_tokens, Hq = 4, Hkv = 2, Dh = 64;
  auto wq = test::random_bf16(rng, size_t(Dh), 0.5f, 1.5f);
  auto wk = test::random_bf16(rng, size_t(Dh), 0.5f, 1.5f);
  for (bool k_eq_v : {false, true}) {
    SCOPED_TRACE(k_eq_v ? "k_eq_v" : "separate v");
    const int64_t W = (Hq + (k_eq_v ? 1 : 2) * Hkv) * Dh;
    auto x = test::random_bf16(rng, size_t(T * W), -2.f, 2.f);
    auto run = [&](Backend& b, const StepTensors& step, PagedKv& kv) {
      QkNorm norm{put(b, wq, {Dh}), put(b, wk, {Dh}), 1e-6f, 0.f,
                  put(b, std::vector<float>(size_t(Dh), 1.f), {Dh})};
      kv.k = b.zeros(b.act_dtype(), {NB, BS, Hkv, Dh});
      kv.v = b.zeros(b.act_dtype(), {NB, BS, Hkv, Dh});
      Tensor q = b.alloc(b.act_dtype(), {T, Hq, Dh});
      b.qkv_to_cache(q, put(b, x, {T, W}), kv, step, test::rope_spec(Dh, 1.f), norm);
      return q;
    };
    PagedKv kv_c, kv_g;
    Tensor q_c = run(*be.cpu, step_c, kv_c), q_g = run(*be.gpu, step_g, kv_g);
    EXPECT_LE(rel_err_between(*be.gpu, q_g, *be.cpu, q_c), kBf16Tol);
    EXPECT_LE(rel_err_between(*be.gpu, kv_g.k, *be.cpu, kv_c.k), kBf16Tol);
    EXPECT_LE(rel_err_between(*be.gpu, kv_g.v, *be.cpu, kv_c.v), kBf16Tol);
  }
}

struct Routed {
  std::vector<float> weights;
  std::vector<float> ids;
};

Routed route(Backend& be, const Tensor& logits, int64_t T, int k, bool renorm, bool poison) {
  Tensor w = poison ? test::poisoned(be, DType::F32, {T, k}) : be.alloc(DType::F32, {T, k});
  Tensor ids = poison ? test::poisoned(be, DType::I32, {T, k}) : be.alloc(DType::I32, {T, k});
  be.topk_route(w, ids, logits, k, renorm);
  return {test::to_vec(be, w), test::to_vec(be, ids)};
}

TEST(CudaTopkRoute, SameExpertsAndWeightsAsCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [T, E, k] : {std::tuple<int64_t, int64_t, int>{1, 8, 2}, {33, 64, 8}, {5, 128, 8},
                           {9, 6, 6}, {70, 40, 1}})
      for (bool renorm : {false, true})
        for (DType dt : {DType::BF16, DType::F32}) {
          SCOPED_TRACE(testing::Message() << "T " << T << " E " << E << " k " << k << " renorm "
                                          << renorm << " " << dtype_name(dt));
          auto logits = test::random_bf16(rng, size_t(T * E), -4.f, 4.f);
          const Routed ref = route(*be.cpu, put(*be.cpu, logits, {T, E}), T, k, renorm, false);
          const Routed got =
              route(*be.gpu, test::put_as(*be.gpu, logits, {T, E}, dt), T, k, renorm, true);
          EXPECT_EQ(got.ids, ref.ids);
          EXPECT_LE(test::rel_err(got.weights, ref.weights), 1e-4);
        }
  }
}

// Equal logits: the lower expert id comes first, as on the CPU.
TEST(CudaTopkRoute, TiesGoToTheLowerId) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const std::vector<float> logits = {1, 3, 3, 0, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                                     2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 5, 2, 2, 2, 2, 2, 2};
  const Routed got = route(*be.gpu, put(*be.gpu, logits, {1, 40}), 1, 5, true, true);
  EXPECT_EQ(got.ids, (std::vector<float>{33, 1, 2, 4, 5}));
  const Routed ref = route(*be.cpu, put(*be.cpu, logits, {1, 40}), 1, 5, true, false);
  EXPECT_EQ(got.ids, ref.ids);
}

// k distinct experts per token, random; weights random positive.
void random_routing(std::mt19937& rng, int64_t T, int64_t E, int64_t k, std::vector<int32_t>& ids,
                    std::vector<float>& weights) {
  ids.clear();
  std::vector<int32_t> all(static_cast<size_t>(E));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t t = 0; t < T; t++) {
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
  }
  weights = test::random_vec(rng, size_t(T * k), 0.05f, 1.f);
}

TEST(CudaMoeExperts, MatchesCpuAcrossShapesAndActivations) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  struct Case {
    int64_t T, E, k, D, F;
  };
  // Odd D / F take the scalar load path; T = 300 over 4 experts gives several row tiles
  // per expert; E = 16 with T = 1 leaves most experts empty.
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (Case c : {Case{1, 16, 2, 64, 32}, {5, 8, 2, 40, 24}, {70, 16, 4, 33, 20},
                   {300, 4, 2, 128, 72}, {200, 3, 1, 72, 136}})
      for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
        SCOPED_TRACE(testing::Message() << "T " << c.T << " E " << c.E << " k " << c.k << " D "
                                        << c.D << " F " << c.F << " act " << int(act));
        auto x = test::random_bf16(rng, size_t(c.T * c.D), -2.f, 2.f);
        auto gu = test::random_bf16(rng, size_t(c.E * 2 * c.F * c.D), -0.3f, 0.3f);
        auto down = test::random_bf16(rng, size_t(c.E * c.D * c.F), -0.3f, 0.3f);
        std::vector<int32_t> ids;
        std::vector<float> w;
        random_routing(rng, c.T, c.E, c.k, ids, w);
        auto run = [&](Backend& b, Tensor out) {
          b.moe_experts(out, put(b, x, {c.T, c.D}), test::put_as(b, w, {c.T, c.k}, DType::F32),
                        test::put_i32(b, ids, {c.T, c.k}),
                        Linear{.weight = put(b, gu, {c.E, 2 * c.F, c.D})},
                        Linear{.weight = put(b, down, {c.E, c.D, c.F})}, act);
          return out;
        };
        Tensor ref = run(*be.cpu, be.cpu->alloc(DType::F32, {c.T, c.D}));
        Tensor got = run(*be.gpu, test::poisoned(*be.gpu, DType::BF16, {c.T, c.D}));
        EXPECT_LE(rel_err_between(*be.gpu, got, *be.cpu, ref), kBf16Tol);
      }
  }
}

// Route then run the experts twice with the same sizes: the second pass allocates nothing
// new from the driver (the steady state a CUDA graph replay relies on).
TEST(CudaMoeExperts, SteadyStateAllocatesNothingNew) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(41);
  const int64_t T = 37, E = 8, k = 2, D = 64, F = 48;
  Tensor gu = put(gpu, test::random_bf16(rng, size_t(E * 2 * F * D)), {E, 2 * F, D});
  Tensor down = put(gpu, test::random_bf16(rng, size_t(E * D * F)), {E, D, F});
  Tensor router = put(gpu, test::random_bf16(rng, size_t(E * D)), {E, D});
  Tensor x = put(gpu, test::random_bf16(rng, size_t(T * D)), {T, D});
  auto step = [&] {
    Tensor logits = gpu.alloc(DType::BF16, {T, E});
    gpu.linear(logits, x, Linear{router});
    Tensor w = gpu.alloc(DType::F32, {T, k}), ids = gpu.alloc(DType::I32, {T, k});
    gpu.topk_route(w, ids, logits, int(k), true);
    Tensor out = gpu.alloc(DType::BF16, {T, D});
    gpu.moe_experts(out, x, w, ids, Linear{gu}, Linear{down}, Activation::SiLU);
    return test::to_vec(gpu, out);
  };
  const auto first = step();
  const int64_t reserved = gpu.reserved_bytes();
  EXPECT_EQ(step(), first);  // deterministic, too
  EXPECT_EQ(gpu.reserved_bytes(), reserved);
}

}  // namespace
}  // namespace tandem
