// The FP8 linears on CUDA (cuda_linear_fp8.cu) against the CPU twin (cpu_linear_fp8.cpp) on
// random inputs: every scale layout (per tensor, per channel, 128x128 blocks, the 1x128
// rows of fused shards, partial blocks), dynamic and static inputs, bias, bf16 and f32
// outputs, 1-256 rows, and each GEMM path (the weight stream, cuBLASLt with its scales,
// cuBLASLt + the scale kernel, the wgmma GEMM); then the wgmma GEMM on the edges of its
// tiles (9-512 rows, N and K off the tiles, tiles cut over CTAs or not) and its
// determinism.
// Then the weight stream on odd shapes, twice bit for bit.
// Both sides quantize x themselves with the same f64 arithmetic, so they give every
// element the same e4m3 value and differ by summation order and the bf16 rounding of the
// output (a quotient on an exact e4m3 midpoint, common with bf16 inputs, once made the two
// disagree by a whole e4m3 step of one term).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_linear_fp8.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_fp8_linear_test {

// Restores the wgmma GEMM's process-wide split override (the path and the accumulation
// are the test's own backend's).
struct PathGuard {
  int saved_splits = fp8_wgmma_splits();
  ~PathGuard() { set_fp8_wgmma_splits(saved_splits); }
};

void set_fast_accum(CudaBackend& be, bool fast) {
  CudaOptions options = be.options();
  options.fp8_fast_accum = fast;
  be.set_options(options);
}

struct Layout {
  ScaleGranularity granularity;
  int block_n = 0, block_k = 0;
};

// A random FP8 Linear [N, K] with `layout`, the same bytes on both backends.
struct Fp8Case {
  Linear cpu, gpu;
};

Fp8Case make_case(test::Backends& be, std::mt19937& rng, int64_t N, int64_t K, Layout layout,
                  bool static_input, bool with_bias) {
  Tensor codes = Tensor::empty_host(DType::F8E4M3, {N, K});
  std::uniform_real_distribution<float> value(-300.f, 300.f), scale(0.5e-3f, 2e-3f);
  for (int64_t i = 0; i < N * K; i++) codes.ptr<uint8_t>()[i] = f32_to_f8e4m3(value(rng));
  int64_t num_scales = 1;
  if (layout.granularity == ScaleGranularity::PerChannel) num_scales = N;
  if (layout.granularity == ScaleGranularity::Block)
    num_scales = ((N + layout.block_n - 1) / layout.block_n) * ((K + layout.block_k - 1) / layout.block_k);
  std::vector<float> s(static_cast<size_t>(num_scales));
  for (float& v : s) v = scale(rng);
  std::vector<float> b = test::random_bf16(rng, size_t(N));
  Fp8Case c;
  for (Backend* backend : {be.cpu.get(), static_cast<Backend*>(be.gpu.get())}) {
    Linear l;
    l.weight = backend->upload(codes, DType::F8E4M3);
    LinearQuant q;
    q.granularity = layout.granularity;
    q.block_n = layout.block_n;
    q.block_k = layout.block_k;
    q.weight_scale = backend->upload(test::host_f32(s, {num_scales}), DType::F32);
    q.input = static_input ? InputScaling::Static : InputScaling::Dynamic;
    if (static_input) q.input_scale = backend->upload(test::host_f32({0.004f}, {1}), DType::F32);
    l.quant = q;
    if (with_bias) l.bias = test::put(*backend, b, {N});
    (backend == be.cpu.get() ? c.cpu : c.gpu) = l;
  }
  return c;
}

// The bound for f32 outputs: the f32 sums are off by the summation order alone (1e-4 at
// K = 4,096), or, with K chained in the tensor cores' accumulator (CudaOptions::
// fp8_fast_accum, the default), by its shorter running sum too (cuBLASLt's: 1.2e-3 at
// K = 4,096, 2.6e-3 at 14,336 on the H200). bf16 outputs keep 5e-3 either way (their
// rounding is 1.7e-3).
double f32_bound(const test::Backends& be) {
  return be.gpu->options().fp8_fast_accum ? 5e-3 : 1e-3;
}

bool is_sm90(const test::Backends& be) {
  return be.gpu->props().major == 9 && be.gpu->props().minor == 0;
}

struct Shape2 {
  int64_t N, K;
};

TEST(CudaFp8Linear, MatchesTheCpuTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  PathGuard guard;
  test::Backends be;
  std::mt19937 rng(20);
  const Layout layouts[] = {{ScaleGranularity::PerTensor},
                            {ScaleGranularity::PerChannel},
                            {ScaleGranularity::Block, 128, 128},
                            {ScaleGranularity::Block, 1, 128},
                            {ScaleGranularity::Block, 128, 64}};
  // Whole blocks; partial blocks in both dims; K not a multiple of 16 (element loads);
  // the weight stream's several chunks per row with a partial last one, rows past N.
  const Shape2 shapes[] = {{384, 256}, {200, 328}, {130, 40}, {200, 4160}};
  const Fp8GemmPath paths[] = {Fp8GemmPath::Auto, Fp8GemmPath::Stream, Fp8GemmPath::Epilogue,
                               Fp8GemmPath::Lt, Fp8GemmPath::Wgmma};
  for (const Fp8GemmPath path : paths)
    for (const Layout& layout : layouts)
      for (const Shape2& shape : shapes)
        for (int variant = 0; variant < 3; variant++) {  // dynamic; static + bias; f32 out
          const bool block = layout.granularity == ScaleGranularity::Block;
          const bool static_input = variant == 1 && !block, with_bias = variant == 1;
          const bool out_f32 = variant == 2;
          be.gpu->set_fp8_gemm_path(path);
          Fp8Case c = make_case(be, rng, shape.N, shape.K, layout, static_input, with_bias);
          for (int64_t T : {1, 2, 3, 8, 17, 256}) {
            SCOPED_TRACE(testing::Message() << "path " << int(path) << " granularity "
                                            << int(layout.granularity) << " block " << layout.block_n
                                            << "x" << layout.block_k << " N " << shape.N << " K "
                                            << shape.K << " variant " << variant << " T " << T);
            auto x = test::random_bf16(rng, size_t(T * shape.K), -2.f, 2.f);
            Tensor ref = be.cpu->alloc(DType::F32, {T, shape.N});
            be.cpu->linear(ref, test::put(*be.cpu, x, {T, shape.K}), c.cpu);
            Tensor out = test::poisoned(*be.gpu, out_f32 ? DType::F32 : DType::BF16, {T, shape.N});
            be.gpu->linear(out, test::put(*be.gpu, x, {T, shape.K}), c.gpu);
            EXPECT_LE(test::rel_err_between(*be.gpu, out, *be.cpu, ref),
                      out_f32 ? f32_bound(be) : 5e-3);
          }
        }
}

// Where a [T, N] result is off (for a first run on new hardware): how many elements differ
// from the reference by more than 2% of its largest magnitude, the token and channel
// ranges they span, and the first few.
std::string where_off(const std::vector<float>& got, const std::vector<float>& want, int64_t N) {
  float peak = 0.f;
  for (float v : want) peak = std::max(peak, std::fabs(v));
  int64_t bad = 0, t_lo = INT64_MAX, t_hi = -1, n_lo = INT64_MAX, n_hi = -1;
  std::string first;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::fabs(got[i] - want[i]) <= 0.02f * peak) continue;  // NaN lands below
    const int64_t t = int64_t(i) / N, n = int64_t(i) % N;
    if (bad++ < 6) first += " [" + std::to_string(t) + "," + std::to_string(n) + "] " +
                            std::to_string(got[i]) + " vs " + std::to_string(want[i]);
    t_lo = std::min(t_lo, t), t_hi = std::max(t_hi, t), n_lo = std::min(n_lo, n), n_hi = std::max(n_hi, n);
  }
  if (bad == 0) return "no element off by 2% of the peak";
  return std::to_string(bad) + " of " + std::to_string(want.size()) + " off, tokens " +
         std::to_string(t_lo) + ".." + std::to_string(t_hi) + ", channels " + std::to_string(n_lo) +
         ".." + std::to_string(n_hi) + ":" + first;
}

// The wgmma GEMM (cuda_gemm_fp8_sm90.cu) where its tiles are ragged: 9-512 rows (one to
// four token tiles of 16 to 256 tokens), N off 128 and off 4 (the scalar stores), K off 128
// and below it; per tensor and per channel; dynamic and static inputs, bias, f32 out; with
// K not split, split by the rule and split in 3 (on the small shapes, tiles cut into
// parts of one or two k-blocks: the fix-up at its most contended). Every output computed
// by the rule is computed twice and must not change by a bit.
constexpr int kWgmmaSplits[] = {1, 0, 3};  // the split override, 0 = the rule

// The o projection at 17-300 rows, a small shape whose tiles are cut into many parts and
// one of a single channel tile, each call twice: a quick first check of the kernel
// (--gtest_filter=CudaFp8Linear.WgmmaQuick) before the sweep below.
TEST(CudaFp8Linear, WgmmaQuick) {
  TANDEM_SKIP_WITHOUT_CUDA();
  PathGuard guard;
  test::Backends be;
  if (!is_sm90(be)) GTEST_SKIP() << "the wgmma GEMM needs an sm_90 GPU";
  be.gpu->set_fp8_gemm_path(Fp8GemmPath::Wgmma);
  std::mt19937 rng(23);
  const cudaDeviceProp& props = be.gpu->props();
  const Shape2 shapes[] = {{4096, 4096}, {200, 4160}, {96, 208}};
  for (const Shape2& shape : shapes) {
    Fp8Case c = make_case(be, rng, shape.N, shape.K, {ScaleGranularity::PerChannel}, false, false);
    for (int64_t T : {17, 64, 256, 300}) {
      const Fp8WgmmaPlan plan = plan_fp8_wgmma(T, shape.N, shape.K, props.multiProcessorCount,
                                               int(props.sharedMemPerBlockOptin));
      SCOPED_TRACE(testing::Message()
                   << "N " << shape.N << " T " << T << " plan " << plan.token_tile << "x"
                   << plan.token_tiles << " ctas " << plan.ctas);
      const std::vector<float> xs = test::random_bf16(rng, size_t(T * shape.K), -2.f, 2.f);
      Tensor ref = be.cpu->alloc(DType::F32, {T, shape.N});
      be.cpu->linear(ref, test::put(*be.cpu, xs, {T, shape.K}), c.cpu);
      const Tensor x = test::put(*be.gpu, xs, {T, shape.K});
      Tensor a = test::poisoned(*be.gpu, DType::BF16, {T, shape.N});
      Tensor b = test::poisoned(*be.gpu, DType::BF16, {T, shape.N});
      be.gpu->linear(a, x, c.gpu);
      be.gpu->linear(b, x, c.gpu);
      const std::vector<float> got = test::to_vec(*be.gpu, a), want = test::to_vec(*be.cpu, ref);
      EXPECT_LE(test::rel_err(got, want), 5e-3) << where_off(got, want, shape.N);
      EXPECT_EQ(got, test::to_vec(*be.gpu, b)) << "not deterministic";
    }
  }
}

TEST(CudaFp8Linear, WgmmaEdgesMatchTheCpuTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  PathGuard guard;
  test::Backends be;
  if (!is_sm90(be)) GTEST_SKIP() << "the wgmma GEMM needs an sm_90 GPU";
  be.gpu->set_fp8_gemm_path(Fp8GemmPath::Wgmma);
  std::mt19937 rng(21);
  const Layout layouts[] = {{ScaleGranularity::PerTensor}, {ScaleGranularity::PerChannel}};
  const Shape2 shapes[] = {{200, 4160}, {130, 416}, {96, 208}, {640, 1024}};
  for (const Layout& layout : layouts)
    for (const Shape2& shape : shapes)
      for (int variant = 0; variant < 3; variant++) {  // dynamic; static + bias; f32 out
        const bool static_input = variant == 1, with_bias = variant == 1, out_f32 = variant == 2;
        Fp8Case c = make_case(be, rng, shape.N, shape.K, layout, static_input, with_bias);
        for (int64_t T : {9, 17, 64, 100, 256, 300, 512}) {
          auto x = test::random_bf16(rng, size_t(T * shape.K), -2.f, 2.f);
          Tensor ref = be.cpu->alloc(DType::F32, {T, shape.N});
          be.cpu->linear(ref, test::put(*be.cpu, x, {T, shape.K}), c.cpu);
          const std::vector<float> want = test::to_vec(*be.cpu, ref);
          const Tensor xg = test::put(*be.gpu, x, {T, shape.K});
          for (const int splits : kWgmmaSplits) {
            const Fp8WgmmaPlan plan =
                plan_fp8_wgmma(T, shape.N, shape.K, be.gpu->props().multiProcessorCount,
                               int(be.gpu->props().sharedMemPerBlockOptin), splits);
            SCOPED_TRACE(testing::Message()
                         << "splits " << splits << " granularity " << int(layout.granularity)
                         << " N " << shape.N << " K " << shape.K << " variant " << variant << " T "
                         << T << " plan " << plan.token_tile << "x" << plan.token_tiles << " ctas "
                         << plan.ctas);
            set_fp8_wgmma_splits(splits);
            Tensor out = test::poisoned(*be.gpu, out_f32 ? DType::F32 : DType::BF16, {T, shape.N});
            be.gpu->linear(out, xg, c.gpu);
            const std::vector<float> got = test::to_vec(*be.gpu, out);
            const double err = test::rel_err(got, want);
            EXPECT_LE(err, out_f32 ? f32_bound(be) : 5e-3) << where_off(got, want, shape.N);
            if (splits != 0) continue;
            Tensor again =
                test::poisoned(*be.gpu, out_f32 ? DType::F32 : DType::BF16, {T, shape.N});
            be.gpu->linear(again, xg, c.gpu);
            EXPECT_EQ(got, test::to_vec(*be.gpu, again)) << "not deterministic";
          }
        }
      }
}

// Llama-3.1-8B's o projection at a decode step's row counts, where the plan cuts tiles
// over several CTAs (four each on an H200): the same call twice gives the same bits (the
// cut tiles' sums are added in a fixed order whoever finishes them), through the Wgmma
// path and Auto.
TEST(CudaFp8Linear, WgmmaSplitsAreDeterministic) {
  TANDEM_SKIP_WITHOUT_CUDA();
  PathGuard guard;
  test::Backends be;
  if (!is_sm90(be)) GTEST_SKIP() << "the wgmma GEMM needs an sm_90 GPU";
  std::mt19937 rng(22);
  Fp8Case c = make_case(be, rng, 4096, 4096, {ScaleGranularity::PerChannel}, false, false);
  const cudaDeviceProp& props = be.gpu->props();
  for (int64_t T : {16, 64, 256}) {
    const std::vector<float> xs = test::random_bf16(rng, size_t(T * 4096), -2.f, 2.f);
    const Tensor x = test::put(*be.gpu, xs, {T, 4096});
    Tensor ref = be.cpu->alloc(DType::F32, {T, 4096});
    be.cpu->linear(ref, test::put(*be.cpu, xs, {T, 4096}), c.cpu);
    const Fp8WgmmaPlan plan =
        plan_fp8_wgmma(T, 4096, 4096, props.multiProcessorCount, int(props.sharedMemPerBlockOptin));
    for (const Fp8GemmPath path : {Fp8GemmPath::Wgmma, Fp8GemmPath::Auto}) {
      SCOPED_TRACE(testing::Message()
                   << "T " << T << " path " << int(path) << " tile " << plan.token_tile << " x"
                   << plan.token_tiles << " ctas " << plan.ctas);
      be.gpu->set_fp8_gemm_path(path);
      Tensor a = be.gpu->alloc(DType::BF16, {T, 4096}), b = be.gpu->alloc(DType::BF16, {T, 4096});
      be.gpu->linear(a, x, c.gpu);
      be.gpu->linear(b, x, c.gpu);
      EXPECT_EQ(test::to_vec(*be.gpu, a), test::to_vec(*be.gpu, b));
      EXPECT_LE(test::rel_err_between(*be.gpu, a, *be.cpu, ref), 5e-3);
    }
  }
}

// The tensor-core GEMMs with K chained in the tensor cores' own accumulator
// (CudaOptions::fp8_fast_accum) and promoted every 128 columns, on the 8B model's widest K (down,
// 14,336) and on 4,096, at a decode batch's and a prefill chunk's row counts, against the
// CPU twin's f32 sums: fast within 5e-3 (measured up to 3.1e-3; the bar is 1e-2),
// promoted within 5e-3 (bf16 out) and 1e-3 (f32 out); the figures are printed for the
// record.
TEST(CudaFp8Linear, FastAccumulationStaysCloseToTheCpuTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  PathGuard guard;
  test::Backends be;
  std::mt19937 rng(24);
  const Shape2 shapes[] = {{1024, 4096}, {512, 14336}};
  for (const Shape2& shape : shapes) {
    Fp8Case c = make_case(be, rng, shape.N, shape.K, {ScaleGranularity::PerChannel}, false, false);
    for (int64_t T : {64, 256, 1024}) {
      const std::vector<float> xs = test::random_bf16(rng, size_t(T * shape.K), -2.f, 2.f);
      Tensor ref = be.cpu->alloc(DType::F32, {T, shape.N});
      be.cpu->linear(ref, test::put(*be.cpu, xs, {T, shape.K}), c.cpu);
      const std::vector<float> want = test::to_vec(*be.cpu, ref);
      const Tensor x = test::put(*be.gpu, xs, {T, shape.K});
      for (const Fp8GemmPath path : {Fp8GemmPath::Lt, Fp8GemmPath::Wgmma})
        for (const bool fast : {false, true})
          for (const DType dtype : {DType::BF16, DType::F32}) {
            if (path == Fp8GemmPath::Wgmma && (!is_sm90(be) || T > kFp8WgmmaMaxRows)) continue;
            be.gpu->set_fp8_gemm_path(path);
            set_fast_accum(*be.gpu, fast);
            Tensor out = test::poisoned(*be.gpu, dtype, {T, shape.N});
            be.gpu->linear(out, x, c.gpu);
            const double err = test::rel_err(test::to_vec(*be.gpu, out), want);
            std::printf("fp8 accumulation: K %5lld T %4lld %-5s %-8s %s out: rel err %.2e\n",
                        (long long)shape.K, (long long)T,
                        path == Fp8GemmPath::Lt ? "Lt" : "wgmma", fast ? "fast" : "promoted",
                        dtype == DType::F32 ? "f32" : "bf16", err);
            EXPECT_LE(err, fast || dtype == DType::BF16 ? 5e-3 : 1e-3)
                << "K " << shape.K << " T " << T << " path " << int(path) << " fast " << fast;
          }
    }
  }
}

// The FP8 linears' input quantized by the op that writes the input (Fp8Input: rms_norm_fp8,
// add_rms_norm_fp8, gated_act_fp8): the ops' outputs are bit for bit the plain ops', they
// make the copy for more rows than the weight stream takes (none for 1-8), and a linear
// reading the e4m3 copy (linear_fp8_input) gives bit for bit what it gives quantizing x
// itself, on each path Auto takes (the wgmma GEMM at 9 and 17 rows, cuBLASLt at 300), for the
// block-per-row norm (4,096 columns), the warp-per-row one (512) and rows that take no
// 16-byte loads (100 columns: the plain stream then).
TEST(CudaFp8Linear, InputsQuantizedWhereTheyAreWrittenAreTheLinearsOwn) {
  TANDEM_SKIP_WITHOUT_CUDA();
  PathGuard guard;
  test::Backends be;
  Backend& gpu = *be.gpu;
  std::mt19937 rng(25);
  auto same = [&](const Tensor& a, const Tensor& b) {
    return test::to_vec(gpu, a) == test::to_vec(gpu, b);
  };
  for (const int64_t C : {4096, 512, 100}) {
    Fp8Case c = make_case(be, rng, 256, C, {ScaleGranularity::PerChannel}, false, false);
    const Tensor w = test::put(gpu, test::random_bf16(rng, size_t(C), 0.5f, 1.5f), {C});
    for (const int64_t T : {1, 8, 9, 17, 300}) {
      SCOPED_TRACE(testing::Message() << "C " << C << " T " << T);
      const bool copies = T > kFp8GemvMaxRows;
      const std::vector<float> res0 = test::random_bf16(rng, size_t(T * C), -3.f, 3.f);
      const Tensor x = test::put(gpu, test::random_bf16(rng, size_t(T * C), -3.f, 3.f), {T, C});
      // add_rms_norm and rms_norm, plain and with the e4m3 copy.
      Tensor res_a = test::put(gpu, res0, {T, C}), res_b = test::put(gpu, res0, {T, C});
      Tensor h_a = gpu.alloc(DType::BF16, {T, C}), h_b = gpu.alloc(DType::BF16, {T, C});
      gpu.add_rms_norm(h_a, res_a, x, w, 1e-5f, 0.f);
      Fp8Input hq;
      gpu.add_rms_norm_fp8(h_b, hq, res_b, x, w, 1e-5f, 0.f);
      ASSERT_EQ(hq.defined(), copies);
      EXPECT_TRUE(same(h_a, h_b) && same(res_a, res_b)) << "add_rms_norm_fp8 changed its outputs";
      Tensor n_a = gpu.alloc(DType::BF16, {T, C}), n_b = gpu.alloc(DType::BF16, {T, C});
      gpu.rms_norm(n_a, x, w, 1e-5f, 1.f);
      Fp8Input nq;
      gpu.rms_norm_fp8(n_b, nq, x, w, 1e-5f, 1.f);
      ASSERT_EQ(nq.defined(), copies);
      EXPECT_TRUE(same(n_a, n_b)) << "rms_norm_fp8 changed its output";
      // gated_act over [T, 2C].
      const Tensor gu = test::put(gpu, test::random_bf16(rng, size_t(T * 2 * C), -4.f, 4.f), {T, 2 * C});
      Tensor act_a = gpu.alloc(DType::BF16, {T, C}), act_b = gpu.alloc(DType::BF16, {T, C});
      gpu.gated_act(act_a, gu, Activation::SiLU);
      Fp8Input aq;
      gpu.gated_act_fp8(act_b, aq, gu, Activation::SiLU);
      ASSERT_EQ(aq.defined(), copies);
      EXPECT_TRUE(same(act_a, act_b)) << "gated_act_fp8 changed its output";
      // Each copy through the linear, against the linear quantizing the same input itself.
      for (const auto& [input, q] : {std::pair{&h_b, &hq}, {&n_b, &nq}, {&act_b, &aq}}) {
        Tensor own = test::poisoned(gpu, DType::BF16, {T, 256});
        Tensor copied = test::poisoned(gpu, DType::BF16, {T, 256});
        gpu.linear(own, *input, c.gpu);
        gpu.linear_fp8_input(copied, *input, *q, c.gpu);
        EXPECT_TRUE(same(own, copied)) << "the linear read a different e4m3 copy";
      }
    }
  }
}

// The weight stream (the ring of cuda_gemv_fp8.cu) at 1, 2 and 5 rows against the CPU twin,
// on shapes off its tiles: N odd and off the 16-row groups, K off the 64-column segments
// (131 x 4112: 65 segments; 333 x 1040: 17); per channel, per tensor with a static input
// and a bias, f32 out. Each call runs twice and must not change by a bit.
TEST(CudaFp8Linear, StreamMatchesTheCpuTwinOnOddShapesAndRepeatsItself) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(45);
  for (const Shape2 shape : {Shape2{131, 4112}, Shape2{333, 1040}, Shape2{17, 208}})
    for (int variant = 0; variant < 3; variant++) {  // dynamic; static + bias; f32 out
      const bool static_input = variant == 1, out_f32 = variant == 2;
      const Layout layout{static_input ? ScaleGranularity::PerTensor
                                       : ScaleGranularity::PerChannel};
      Fp8Case c = make_case(be, rng, shape.N, shape.K, layout, static_input, variant == 1);
      for (const int64_t T : {1, 2, 5}) {
        SCOPED_TRACE(testing::Message() << "N " << shape.N << " K " << shape.K << " variant "
                                        << variant << " T " << T);
        const auto x = test::random_bf16(rng, size_t(T * shape.K), -2.f, 2.f);
        Tensor ref = be.cpu->alloc(DType::F32, {T, shape.N});
        be.cpu->linear(ref, test::put(*be.cpu, x, {T, shape.K}), c.cpu);
        const Tensor xg = test::put(*be.gpu, x, {T, shape.K});
        ASSERT_TRUE(fp8_gemv_fits(T, shape.N, shape.K, 0, xg.data, c.gpu.weight.data))
            << "the stream takes the shape";
        const DType dt = out_f32 ? DType::F32 : DType::BF16;
        Tensor first = test::poisoned(*be.gpu, dt, {T, shape.N});
        Tensor again = test::poisoned(*be.gpu, dt, {T, shape.N});
        be.gpu->linear(first, xg, c.gpu);
        be.gpu->linear(again, xg, c.gpu);
        EXPECT_LE(test::rel_err_between(*be.gpu, first, *be.cpu, ref),
                  out_f32 ? f32_bound(be) : 5e-3);
        EXPECT_TRUE(test::to_vec(*be.gpu, first) == test::to_vec(*be.gpu, again))
            << "not deterministic";
      }
    }
}

TEST(CudaFp8Linear, RefusesWhatItCannotCompute) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(3);
  Fp8Case c = make_case(be, rng, 64, 64, {ScaleGranularity::PerChannel}, false, false);
  Tensor x = test::put(*be.gpu, test::random_bf16(rng, 2 * 64), {2, 64});
  Tensor out = be.gpu->alloc(DType::BF16, {2, 64});
  Linear weight_only = c.gpu;
  weight_only.quant->input = InputScaling::None;
  EXPECT_THROW(be.gpu->linear(out, x, weight_only), Error);
  Linear short_scales = c.gpu;
  short_scales.quant->weight_scale = be.gpu->upload(test::host_f32({1.f, 2.f}, {2}), DType::F32);
  EXPECT_THROW(be.gpu->linear(out, x, short_scales), Error);
  Tensor wrong_x = test::put(*be.gpu, test::random_bf16(rng, 2 * 32), {2, 32});
  EXPECT_THROW(be.gpu->linear(out, wrong_x, c.gpu), Error);
}

}  // namespace cuda_fp8_linear_test
}  // namespace tandem
