// The few-token decode step's kernels chained with programmatic dependent launch
// (cuda_pdl.cuh), against the CPU: a kernel that starts loading before it waits on the
// kernel before must never read what that kernel writes. Here decode attention loads the
// keys of earlier steps early, while qkv_to_cache is still writing the step's own key
// into a slot that held something else; run eagerly and replayed from a graph.
// And the fused decode chain's ops (cuda_decode_chain.cu: rms_norm_linear, linear_add,
// gated_act_linear_add, issue 45) against the CPU twin's compositions of the plain ops, and
// against the same GPU with the fusion off, for 1, 2 and 8 rows (one FP8 weight stream each,
// the norm or activation in its prologue, the residual add in its epilogue) and for 9 (the
// plain ops), on per-channel, per-tensor with a static input scale and [128, 128]-block FP8
// weights. The twin rounds its FP8 inputs to bf16 first, as the GPU's activations are
// (CpuBackend::set_fp8_inputs_bf16).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../backend/step_builder.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_decode_chain_test {

using test::kBf16Tol;
using test::put;
using test::rel_err;
using test::rel_err_between;
using test::to_vec;

TEST(CudaDecodeChain, AttentionRightAfterQkvToCacheSeesTheStepsOwnKey) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(53);
  const int64_t Hq = 32, Hkv = 8, Dh = 128, NB = 40, BS = 16;
  const std::vector<int32_t> ids = test::shuffled_ids(rng, int(NB));
  auto blocks = [&](int from, int n) {
    return std::vector<int32_t>(ids.begin() + from, ids.begin() + from + n);
  };
  // One and two decoding rows: the steps the few-token attention kernel takes.
  const std::vector<std::vector<test::RowSpec>> steps = {
      {test::row_range(150, 1, blocks(0, 10))},
      {test::row_range(300, 1, blocks(0, 19)), test::row_range(63, 1, blocks(19, 4))}};
  const Shape cache_shape{NB, BS, Hkv, Dh};
  // Every slot holds a key and value of an earlier step; the slots this step writes start
  // out far larger than anything qkv_to_cache writes, so reading one early shows.
  std::vector<float> k_old = test::random_bf16(rng, size_t(NB * BS * Hkv * Dh));
  std::vector<float> v_old = test::random_bf16(rng, k_old.size());
  for (const auto& rows : steps) {
    SCOPED_TRACE(testing::Message() << rows.size() << " rows");
    std::vector<float> k_stale = k_old, v_stale = v_old;
    for (const auto& r : rows) {
      const int64_t p = r.positions[0], slot = r.blocks[size_t(p / BS)] * BS + p % BS;
      for (int64_t i = 0; i < Hkv * Dh; i++) {
        k_stale[size_t(slot * Hkv * Dh + i)] = 64.f;
        v_stale[size_t(slot * Hkv * Dh + i)] = -64.f;
      }
    }
    const StepTensors step_c = test::build_step(*be.cpu, rows, int(BS));
    const StepTensors step_g = test::build_step(*be.gpu, rows, int(BS));
    const int64_t T = step_c.num_tokens;
    const auto qkv = test::random_bf16(rng, size_t(T * (Hq + 2 * Hkv) * Dh), -2.f, 2.f);
    const RopeSpec rope = test::rope_spec(int(Dh));
    const AttentionParams params{float(1.0 / std::sqrt(double(Dh))), 0.f, 0};
    struct Chain {
      PagedKv kv;
      Tensor qkv, q, out;
    };
    auto make = [&](Backend& b) {
      Chain c{{put(b, k_stale, cache_shape), put(b, v_stale, cache_shape)},
              put(b, qkv, {T, (Hq + 2 * Hkv) * Dh}),
              b.alloc(b.act_dtype(), {T, Hq, Dh}),
              b.alloc(b.act_dtype(), {T, Hq, Dh})};
      return c;
    };
    auto run = [&](Backend& b, Chain& c, const StepTensors& step) {
      b.qkv_to_cache(c.q, c.qkv, c.kv, step, rope, {});
      b.attention(c.out, c.q, c.kv, step, params);
    };
    Chain cpu = make(*be.cpu);
    run(*be.cpu, cpu, step_c);

    Chain gpu = make(*be.gpu);
    run(*be.gpu, gpu, step_g);
    EXPECT_LE(rel_err_between(*be.gpu, gpu.out, *be.cpu, cpu.out), kBf16Tol) << "eager";

    const Tensor k0 = put(*be.gpu, k_stale, cache_shape), v0 = put(*be.gpu, v_stale, cache_shape);
    be.gpu->synchronize();
    be.gpu->capture_begin();
    run(*be.gpu, gpu, step_g);
    const std::shared_ptr<void> graph = be.gpu->capture_end();
    for (int replay = 0; replay < 3; replay++) {
      SCOPED_TRACE(testing::Message() << "graph replay " << replay);
      be.gpu->copy(gpu.kv.k, k0);  // the stale slots again
      be.gpu->copy(gpu.kv.v, v0);
      be.gpu->copy(gpu.out, test::poisoned(*be.gpu, DType::BF16, {T, Hq, Dh}));
      be.gpu->replay(graph);
      EXPECT_LE(rel_err_between(*be.gpu, gpu.out, *be.cpu, cpu.out), kBf16Tol);
    }
  }
}

struct Layout {
  ScaleGranularity granularity;
  bool static_input = false;
};

constexpr Layout kLayouts[] = {
    {ScaleGranularity::PerChannel}, {ScaleGranularity::PerTensor, true}, {ScaleGranularity::Block}};

// The same random FP8 Linear [N, K] (blocks of [128, 128]) on a backend.
Linear fp8_linear(Backend& be, uint32_t seed, int64_t N, int64_t K, Layout layout) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-300.f, 300.f), scale(0.5e-3f, 2e-3f);
  Tensor codes = Tensor::empty_host(DType::F8E4M3, {N, K});
  for (int64_t i = 0; i < N * K; i++) codes.ptr<uint8_t>()[i] = f32_to_f8e4m3(value(rng));
  const bool block = layout.granularity == ScaleGranularity::Block;
  const int64_t num_scales = block ? ((N + 127) / 128) * ((K + 127) / 128)
                             : layout.granularity == ScaleGranularity::PerChannel ? N
                                                                                  : 1;
  std::vector<float> s(static_cast<size_t>(num_scales));
  for (float& v : s) v = scale(rng);
  Linear l;
  l.weight = be.upload(codes, DType::F8E4M3);
  LinearQuant q;
  q.granularity = layout.granularity;
  q.block_n = block ? 128 : 0;
  q.block_k = block ? 128 : 0;
  q.weight_scale = be.upload(test::host_f32(s, {num_scales}), DType::F32);
  q.input = layout.static_input ? InputScaling::Static : InputScaling::Dynamic;
  if (layout.static_input) q.input_scale = be.upload(test::host_f32({0.01f}, {1}), DType::F32);
  l.quant = q;
  return l;
}

// The three backends of a comparison: the GPU fused (the switch on), the GPU with the
// fusion off (the default), the twin.
struct Three {
  std::unique_ptr<CudaBackend> fused, off = std::make_unique<CudaBackend>(0);
  CpuBackend twin;
  Three() {
    CudaOptions o;
    o.fp8_decode_fusion = true;
    fused = std::make_unique<CudaBackend>(0, o);
    twin.set_fp8_inputs_bf16(true);
  }
  std::vector<Backend*> all() { return {fused.get(), off.get(), &twin}; }
};

// Where the fused form must run: the stream takes T rows of K columns.
void expect_streamed(Three& t, int64_t T, int64_t N, int64_t K) {
  const bool fused = T <= kFp8GemvMaxRows;
  EXPECT_EQ(t.fused->fuses_decode_chain(T), fused);
  EXPECT_FALSE(t.off->fuses_decode_chain(T));
  const void* aligned = reinterpret_cast<const void*>(uintptr_t(256));
  if (fused) {
    EXPECT_TRUE(fp8_gemv_fits(T, N, K, 0, aligned, aligned));
  }
}

TEST(CudaFusedDecode, RmsNormLinearMatchesTheTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Three t;
  const int64_t D = 1024, N = 768;
  std::mt19937 rng(45);
  for (const Layout& layout : kLayouts)
    for (float offset : {0.f, 1.f})
      for (int64_t T : {1, 2, 8, 9}) {
        SCOPED_TRACE(testing::Message() << "granularity " << int(layout.granularity) << " offset "
                                        << offset << " T " << T);
        expect_streamed(t, T, N, D);
        const auto x = test::random_bf16(rng, size_t(T * D), -2.f, 2.f);
        const auto w = test::random_bf16(rng, size_t(D), 0.5f, 1.5f);
        std::vector<std::vector<float>> outs, hs;
        for (Backend* be : t.all()) {
          const Linear l = fp8_linear(*be, 7, N, D, layout);
          Tensor out = be->alloc(be->act_dtype(), {T, N}), h = be->alloc(be->act_dtype(), {T, D});
          be->rms_norm_linear(out, h, put(*be, x, {T, D}), put(*be, w, {D}), 1e-6f, offset, l);
          outs.push_back(to_vec(*be, out));
          hs.push_back(to_vec(*be, h));
        }
        EXPECT_LE(rel_err(hs[0], hs[2]), test::kBf16Tol) << "h against the twin";
        EXPECT_LE(rel_err(outs[0], outs[2]), 1e-2) << "out against the twin";
        EXPECT_LE(rel_err(outs[0], outs[1]), 5e-3) << "fused against unfused";
        EXPECT_LE(rel_err(hs[0], hs[1]), 5e-3) << "h, fused against unfused";
      }
}

TEST(CudaFusedDecode, LinearAddMatchesTheTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Three t;
  const int64_t K = 1024, N = 512;
  std::mt19937 rng(46);
  for (const Layout& layout : kLayouts)
    for (int64_t T : {1, 2, 8, 9}) {
      SCOPED_TRACE(testing::Message() << "granularity " << int(layout.granularity) << " T " << T);
      expect_streamed(t, T, N, K);
      const auto x = test::random_bf16(rng, size_t(T * K), -2.f, 2.f);
      const auto r = test::random_bf16(rng, size_t(T * N), -4.f, 4.f);
      std::vector<std::vector<float>> res;
      for (Backend* be : t.all()) {
        const Linear l = fp8_linear(*be, 8, N, K, layout);
        Tensor residual = put(*be, r, {T, N});
        be->linear_add(residual, put(*be, x, {T, K}), l);
        res.push_back(to_vec(*be, residual));
      }
      EXPECT_LE(rel_err(res[0], res[2]), 1e-2) << "against the twin";
      EXPECT_LE(rel_err(res[0], res[1]), 1e-3) << "fused against unfused";
      EXPECT_GT(rel_err(res[0], r), 1e-2) << "the product was added";
    }
}

TEST(CudaFusedDecode, GatedActLinearAddMatchesTheTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Three t;
  const int64_t F = 1024, N = 512;
  std::mt19937 rng(47);
  for (const Layout& layout : kLayouts)
    for (Activation act : {Activation::SiLU, Activation::GeluTanh})
      for (int64_t T : {1, 2, 8, 9}) {
        SCOPED_TRACE(testing::Message() << "granularity " << int(layout.granularity) << " act "
                                        << int(act) << " T " << T);
        expect_streamed(t, T, N, F);
        const auto gu = test::random_bf16(rng, size_t(T * 2 * F), -3.f, 3.f);
        const auto r = test::random_bf16(rng, size_t(T * N), -4.f, 4.f);
        std::vector<std::vector<float>> res, as;
        for (Backend* be : t.all()) {
          const Linear l = fp8_linear(*be, 9, N, F, layout);
          Tensor residual = put(*be, r, {T, N}), a = be->alloc(be->act_dtype(), {T, F});
          be->gated_act_linear_add(residual, a, put(*be, gu, {T, 2 * F}), act, l);
          res.push_back(to_vec(*be, residual));
          as.push_back(to_vec(*be, a));
        }
        EXPECT_LE(rel_err(as[0], as[2]), test::kBf16Tol) << "a against the twin";
        EXPECT_LE(rel_err(as[0], as[1]), 1e-3) << "a, fused against unfused: the same arithmetic";
        EXPECT_LE(rel_err(res[0], res[2]), 1e-2) << "against the twin";
        EXPECT_LE(rel_err(res[0], res[1]), 1e-3) << "fused against unfused";
      }
}

}  // namespace cuda_decode_chain_test
}  // namespace tandem
