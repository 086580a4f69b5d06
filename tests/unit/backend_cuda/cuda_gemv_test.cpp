// The few-row weight stream (cuda_gemv.cu) against the CPU twin of linear and against
// cuBLASLt, and a chain of programmatically launched kernels (norm → GEMV → gated act →
// GEMV) replayed from a CUDA graph against the same chain launched the ordinary way.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemv.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_gemv_test {

using test::kBf16Tol;
using test::put;
using test::rel_err_between;

// The backend's weight-stream and PDL switches (CudaOptions; PDL is process-wide, and every
// backend made sets it again).
void set_switches(CudaBackend& be, bool gemv, bool pdl) {
  CudaOptions options = be.options();
  options.gemv = gemv;
  options.pdl = pdl;
  be.set_options(options);
}

struct GemvShape {
  int64_t K, N;
};

// Shapes around the stream's units: 8-row groups, 1024-column chunks, partial last ones.
constexpr GemvShape kShapes[] = {{8, 7},       {1024, 8},   {1032, 130},
                                 {3000, 1003}, {4096, 257}, {2056, 9}};

TEST(CudaGemv, MatchesCpuForEveryRowCountItTakes) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(23);
  for (int64_t M = 1; M <= kGemvMaxRows; M++)
    for (const GemvShape& s : kShapes)
      for (int variant = 0; variant < 3; variant++) {  // bf16 out, bf16 out + bias, f32 out
        SCOPED_TRACE(testing::Message()
                     << "M " << M << " K " << s.K << " N " << s.N << " variant " << variant);
        const bool with_bias = variant == 1, out_f32 = variant == 2;
        auto x = test::random_bf16(rng, size_t(M * s.K));
        auto w = test::random_bf16(rng, size_t(s.N * s.K));
        auto b = test::random_bf16(rng, size_t(s.N));
        Tensor ref = be.cpu->alloc(DType::F32, {M, s.N});
        be.cpu->linear(ref, put(*be.cpu, x, {M, s.K}), Linear{put(*be.cpu, w, {s.N, s.K}), with_bias ? put(*be.cpu, b, {s.N}) : Tensor{}});
        Tensor out = test::poisoned(*be.gpu, out_f32 ? DType::F32 : DType::BF16, {M, s.N});
        Tensor xg = put(*be.gpu, x, {M, s.K}), wg = put(*be.gpu, w, {s.N, s.K});
        ASSERT_TRUE(try_gemv(*be.gpu, out, xg, wg, with_bias ? put(*be.gpu, b, {s.N}) : Tensor{}));
        // f32 sums of the same bf16 inputs on both sides; a bf16 output rounds once more.
        EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), out_f32 ? 1e-5 : kBf16Tol);
      }
}

TEST(CudaGemv, DeclinesShapesItDoesNotTake) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(29);
  auto make = [&](int64_t rows, int64_t cols) {
    return put(*be.gpu, test::random_bf16(rng, size_t(rows * cols)), {rows, cols});
  };
  Tensor out3 = be.gpu->alloc(DType::BF16, {kGemvMaxRows + 1, 16});
  EXPECT_FALSE(try_gemv(*be.gpu, out3, make(kGemvMaxRows + 1, 64), make(16, 64), {}));
  Tensor out1 = be.gpu->alloc(DType::BF16, {1, 16});
  EXPECT_FALSE(try_gemv(*be.gpu, out1, make(1, 33), make(16, 33), {}));  // K % 8 != 0
  Tensor big = make(2, 20480);  // 80 KB of x: more than the stream stages
  Tensor out2 = be.gpu->alloc(DType::BF16, {2, 8});
  EXPECT_FALSE(try_gemv(*be.gpu, out2, big, make(8, 20480), {}));
  EXPECT_TRUE(try_gemv(*be.gpu, out1, make(1, 64), make(16, 64), {}));
  set_switches(*be.gpu, /*gemv=*/false, /*pdl=*/true);
  EXPECT_FALSE(try_gemv(*be.gpu, out1, make(1, 64), make(16, 64), {}));
}

// h = rms_norm(x); a = h · w1ᵀ; g = silu(a_gate) · a_up; y = g · w2ᵀ, over three replays. Under PDL
// every kernel of the chain may start before the one before it ends, so a missing wait shows up as
// a result that differs from the ordinary launch order.
TEST(CudaGemv, ProgrammaticChainInAGraphMatchesOrdinaryLaunches) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(31);
  const int64_t M = 2, D = 1024, F = 2816;
  Tensor x = put(*be.gpu, test::random_bf16(rng, size_t(M * D)), {M, D});
  Tensor norm_w = put(*be.gpu, test::random_bf16(rng, size_t(D), 0.5f, 1.5f), {D});
  Tensor w1 = put(*be.gpu, test::random_bf16(rng, size_t(2 * F * D), -0.05f, 0.05f), {2 * F, D});
  Tensor w2 = put(*be.gpu, test::random_bf16(rng, size_t(D * F), -0.05f, 0.05f), {D, F});
  Tensor h = be.gpu->alloc(DType::BF16, {M, D}), a = be.gpu->alloc(DType::BF16, {M, 2 * F});
  Tensor g = be.gpu->alloc(DType::BF16, {M, F}), y = be.gpu->alloc(DType::BF16, {M, D});
  auto chain = [&] {
    be.gpu->rms_norm(h, x, norm_w, 1e-6f, 0.f);
    be.gpu->linear(a, h, Linear{w1});
    be.gpu->gated_act(g, a, Activation::SiLU);
    be.gpu->linear(y, g, Linear{w2});
  };
  set_switches(*be.gpu, /*gemv=*/false, /*pdl=*/false);
  chain();
  const std::vector<float> expected = test::to_vec(*be.gpu, y);

  set_switches(*be.gpu, /*gemv=*/true, /*pdl=*/true);
  be.gpu->capture_begin();
  chain();
  std::shared_ptr<void> graph = be.gpu->capture_end();
  for (int replay = 0; replay < 3; replay++) {
    Tensor poison = test::poisoned(*be.gpu, DType::BF16, {M, D});
    be.gpu->copy(y, poison);
    be.gpu->replay(graph);
    EXPECT_LE(test::rel_err(test::to_vec(*be.gpu, y), expected), kBf16Tol) << "replay " << replay;
  }
}

}  // namespace cuda_gemv_test
}  // namespace tandem
