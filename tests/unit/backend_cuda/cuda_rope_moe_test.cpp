// CUDA rope, topk_route and moe_experts (bf16 and FP8 experts) against their CPU twins on
// fresh random inputs, plus the allocator's steady state over a whole MoE block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "../backend/step_builder.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_rope_moe_test {

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

// FP8 (e4m3) experts: one scale layout of a stacked projection (linear.h).
struct Fp8Layout {
  ScaleGranularity granularity;
  int block_n = 0, block_k = 0;
  bool static_input = false;
};

// A random e4m3 expert stack [E, N, K] and its scales, on the host: weight_scale shaped
// [E, 1] / [E, N] / [E, ⌈N / block_n⌉, ⌈K / block_k⌉], input_scale [E, 1] when static.
struct Fp8Stack {
  Tensor w;  // host, F8E4M3
  std::vector<float> scale, input_scale;
  Shape scale_shape;
};

Fp8Stack random_fp8_stack(std::mt19937& rng, const Fp8Layout& l, int64_t E, int64_t N, int64_t K) {
  std::uniform_real_distribution<float> value(-400.f, 400.f), sw(2e-4f, 6e-4f), sx(0.01f, 0.03f);
  Fp8Stack st;
  st.w = Tensor::empty_host(DType::F8E4M3, {E, N, K});
  for (int64_t i = 0; i < E * N * K; i++) st.w.ptr<uint8_t>()[i] = f32_to_f8e4m3(value(rng));
  st.scale_shape = l.granularity == ScaleGranularity::PerTensor    ? Shape{E, 1}
                   : l.granularity == ScaleGranularity::PerChannel ? Shape{E, N}
                                                                   : Shape{E, (N + l.block_n - 1) / l.block_n,
                                                                           (K + l.block_k - 1) / l.block_k};
  st.scale.resize(size_t(st.scale_shape.numel()));
  for (float& v : st.scale) v = sw(rng);
  if (l.static_input) {
    st.input_scale.resize(size_t(E));
    for (float& v : st.input_scale) v = sx(rng);
  }
  return st;
}

// The stack as a Linear on `be` (the same bytes and scales on each backend), its weight
// scales multiplied by `scale_factor`.
Linear upload_fp8_stack(Backend& be, const Fp8Stack& st, const Fp8Layout& l, float scale_factor = 1.f) {
  std::vector<float> scale = st.scale;
  for (float& v : scale) v *= scale_factor;
  LinearQuant q{.granularity = l.granularity, .block_n = l.block_n, .block_k = l.block_k};
  q.weight_scale = test::put_as(be, scale, st.scale_shape, DType::F32);
  q.input = l.static_input ? InputScaling::Static : InputScaling::Dynamic;
  if (l.static_input)
    q.input_scale = test::put_as(be, st.input_scale, {int64_t(st.input_scale.size()), 1}, DType::F32);
  return Linear{.weight = be.upload(st.w, DType::F8E4M3), .quant = q};
}

// Every scale layout, dynamic and static inputs, against the CPU twin. The twin is told to
// round its FP8 linears' inputs to bf16 first (set_fp8_inputs_bf16, the CUDA FP8 gate's
// yardstick): CUDA holds act(gate)·up in bf16 before down quantizes it, and a bf16 rounding
// ahead of the e4m3 one moves some quotients a whole e4m3 step — on its own up to ~3e-2
// here (printed), which would hide what this test looks for. With it, both sides quantize
// the same values (but for the rare act(gate)·up that rounds differently after sums in
// another order) and differ by summation order and the bf16 output: ~3e-3 on an H200
// (2026-12-03), while a wrong scale, block or row costs orders more.
// Both CUDA kernels, each against the twin and against each other: the reference that
// widens e4m3 to bf16 (gpu) and the e4m3 tensor-core one (tc: TANDEM_FP8_MOE_TC), whose
// only difference is the order of the f32 sums.
TEST(CudaMoeExperts, Fp8ExpertsMatchTheCpuTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0), tc(0, CudaOptions{.fp8_moe_tc = true});
  CpuBackend twin, plain;  // plain: the twin on f32 inputs, for the printed comparison only
  twin.set_fp8_inputs_bf16(true);
  double worst = 0, worst_plain = 0, least_doubled = INFINITY, worst_tc = 0, tc_vs_ref = 0;
  const Fp8Layout layouts[] = {
      {ScaleGranularity::PerTensor, 0, 0, true},  {ScaleGranularity::PerTensor, 0, 0, false},
      {ScaleGranularity::PerChannel, 0, 0, false}, {ScaleGranularity::Block, 128, 128, false},
      // blocks that straddle the GEMM's 64-column tiles (and, for up, start mid-block)
      {ScaleGranularity::Block, 64, 32, false},   {ScaleGranularity::Block, 48, 64, false},
      // the loader's layout for fused shards that do not align with block_n
      {ScaleGranularity::Block, 1, 128, false},   {ScaleGranularity::Block, 128, 128, true}};
  struct Case {
    int64_t T, E, k, D, F;
    int idle;  // an expert no token is routed to, or -1
  };
  // D = 33 / F = 20 take the scalar loads; T = 300 over 4 experts gives several row tiles
  // per expert; D = 200 and F = 160 end in partial blocks of every block_k above.
  const Case cases[] = {{7, 6, 2, 33, 20, -1}, {300, 4, 2, 128, 72, -1}, {11, 5, 2, 64, 40, 3},
                        {40, 8, 2, 200, 160, 0}};
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (const Fp8Layout& l : layouts)
      for (const Case& c : cases)
        for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
          SCOPED_TRACE(testing::Message()
                       << "granularity " << int(l.granularity) << " block " << l.block_n << "x"
                       << l.block_k << " static " << l.static_input << " T " << c.T << " E "
                       << c.E << " D " << c.D << " F " << c.F << " act " << int(act));
          const Fp8Stack gu = random_fp8_stack(rng, l, c.E, 2 * c.F, c.D);
          const Fp8Stack dn = random_fp8_stack(rng, l, c.E, c.D, c.F);
          const auto x = test::random_bf16(rng, size_t(c.T * c.D), -2.f, 2.f);
          std::vector<int32_t> ids;
          std::vector<float> w;
          random_routing(rng, c.T, c.idle < 0 ? c.E : c.E - 1, c.k, ids, w);
          if (c.idle >= 0)
            for (int32_t& id : ids) id += id >= c.idle ? 1 : 0;
          auto run = [&](Backend& b, Tensor out, float scale_factor) {
            b.moe_experts(out, put(b, x, {c.T, c.D}), test::put_as(b, w, {c.T, c.k}, DType::F32),
                          test::put_i32(b, ids, {c.T, c.k}), upload_fp8_stack(b, gu, l, scale_factor),
                          upload_fp8_stack(b, dn, l), act);
            return out;
          };
          Tensor ref = run(twin, twin.alloc(DType::F32, {c.T, c.D}), 1.f);
          Tensor got = run(gpu, test::poisoned(gpu, DType::BF16, {c.T, c.D}), 1.f);
          const double err = rel_err_between(gpu, got, twin, ref);
          EXPECT_LE(err, 1e-2);
          // Not vacuous: with gate_up's weight scales doubled the output moves far past
          // the tolerance (the scales are applied, and where the twin applies them).
          Tensor doubled = run(gpu, test::poisoned(gpu, DType::BF16, {c.T, c.D}), 2.f);
          const double moved = rel_err_between(gpu, doubled, twin, ref);
          EXPECT_GT(moved, 0.1);
          Tensor got_tc = run(tc, test::poisoned(tc, DType::BF16, {c.T, c.D}), 1.f);
          const double err_tc = rel_err_between(tc, got_tc, twin, ref);
          EXPECT_LE(err_tc, 1e-2) << "tensor cores";
          EXPECT_LE(rel_err_between(tc, got_tc, gpu, got), 1e-2) << "tensor cores vs reference";
          Tensor doubled_tc = run(tc, test::poisoned(tc, DType::BF16, {c.T, c.D}), 2.f);
          EXPECT_GT(rel_err_between(tc, doubled_tc, twin, ref), 0.1) << "tensor cores";
          worst_tc = std::max(worst_tc, err_tc);
          tc_vs_ref = std::max(tc_vs_ref, rel_err_between(tc, got_tc, gpu, got));
          Tensor ref_plain = run(plain, plain.alloc(DType::F32, {c.T, c.D}), 1.f);
          worst = std::max(worst, err);
          worst_plain = std::max(worst_plain, rel_err_between(gpu, got, plain, ref_plain));
          least_doubled = std::min(least_doubled, moved);
        }
  }
  std::printf("fp8 experts: rel err against the twin on bf16 inputs <= %.2e (on f32 inputs "
              "<= %.2e); doubled gate_up scales >= %.2e\n", worst, worst_plain, least_doubled);
  std::printf(
      "fp8 experts on the tensor cores: against the twin <= %.2e, against the "
      "reference kernel <= %.2e\n",
      worst_tc, tc_vs_ref);
}

// FP8 layouts the CUDA experts cannot take fail with tandem's Error, naming the tensor.
TEST(CudaMoeExperts, Fp8RejectsBadLayouts) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(43);
  const int64_t T = 3, E = 4, k = 2, D = 64, F = 32;
  const Fp8Layout per_channel{ScaleGranularity::PerChannel};
  const Fp8Stack gu = random_fp8_stack(rng, per_channel, E, 2 * F, D);
  const Fp8Stack dn = random_fp8_stack(rng, per_channel, E, D, F);
  Tensor x = put(gpu, test::random_bf16(rng, size_t(T * D)), {T, D});
  Tensor w = test::put_as(gpu, {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, {T, k}, DType::F32);
  Tensor ids = test::put_i32(gpu, {0, 1, 2, 3, 1, 2}, {T, k});
  Tensor out = gpu.alloc(DType::BF16, {T, D});
  auto run = [&](const Linear& g, const Linear& d) {
    gpu.moe_experts(out, x, w, ids, g, d, Activation::SiLU);
  };
  const Linear good_gu = upload_fp8_stack(gpu, gu, per_channel), good_dn = upload_fp8_stack(gpu, dn, per_channel);
  EXPECT_NO_THROW(run(good_gu, good_dn));
  // weight_scale with the wrong leading dimension ([E - 1, N]).
  Linear bad = good_gu;
  bad.quant->weight_scale = test::put_as(gpu, std::vector<float>(size_t((E - 1) * 2 * F), 1e-3f),
                                         {E - 1, 2 * F}, DType::F32);
  EXPECT_THROW(run(bad, good_dn), Error);
  // Block scales whose block_k is not a multiple of the GEMM's K step (32).
  const Fp8Layout block16{ScaleGranularity::Block, 16, 16};
  const Fp8Stack gu16 = random_fp8_stack(rng, block16, E, 2 * F, D);
  EXPECT_THROW(run(upload_fp8_stack(gpu, gu16, block16), good_dn), Error);
  // A static input without its input_scale, and inputs left unquantized (weight-only FP8).
  bad = good_gu;
  bad.quant->input = InputScaling::Static;
  EXPECT_THROW(run(bad, good_dn), Error);
  bad.quant->input = InputScaling::None;
  EXPECT_THROW(run(bad, good_dn), Error);
  // One projection FP8, the other bf16.
  Linear bf16_down{.weight = put(gpu, test::random_bf16(rng, size_t(E * D * F)), {E, D, F})};
  EXPECT_THROW(run(good_gu, bf16_down), Error);
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

}  // namespace cuda_rope_moe_test
}  // namespace tandem
