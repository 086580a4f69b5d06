// The vision encoders' ops (layer_norm with a bias, clamp) against naive double loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace cpu_vision_ops_test {

using test::device_f32;
using test::kTol;
using test::rel_err;
using test::to_vec;

std::vector<double> layer_norm_ref(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, int R, int C, double eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < R; r++) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++) mean += x[size_t(r * C + c)];
    mean /= C;
    for (int c = 0; c < C; c++)
      var += (x[size_t(r * C + c)] - mean) * (x[size_t(r * C + c)] - mean);
    const double inv = 1.0 / std::sqrt(var / C + eps);
    for (int c = 0; c < C; c++)
      out[size_t(r * C + c)] = (x[size_t(r * C + c)] - mean) * inv * w[size_t(c)] + b[size_t(c)];
  }
  return out;
}

TEST(CpuLayerNorm, MatchesNaiveWithF32AndBf16Weights) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [R, C] : {std::pair{1, 32}, {7, 72}, {65, 1152}}) {
      SCOPED_TRACE(testing::Message() << R << "x" << C);
      // An offset mean: LayerNorm must subtract it (an RMSNorm would not).
      auto x = test::random_vec(rng, size_t(R * C), 2.f, 6.f);
      auto w = test::random_vec(rng, size_t(C), 0.5f, 1.5f);
      auto b = test::random_vec(rng, size_t(C));
      for (DType wd : {DType::F32, DType::BF16}) {
        Tensor wt = be->upload(test::host_f32(w, {C}), wd),
               bt = be->upload(test::host_f32(b, {C}), wd);
        // The reference reads the weights as the backend holds them.
        const auto wr = to_vec(*be, wt), br = to_vec(*be, bt);
        Tensor out = be->alloc(DType::F32, {R, C});
        Tensor xd = device_f32(*be, x, {R, C});
        be->layer_norm(out, xd, wt, bt, 1e-6f);
        EXPECT_LE(rel_err(to_vec(*be, out), layer_norm_ref(x, wr, br, R, C, 1e-6)), kTol);
        be->layer_norm(xd, xd, wt, bt, 1e-6f);  // in place gives the same bits
        EXPECT_EQ(to_vec(*be, xd), to_vec(*be, out));
      }
    }
  }
}

TEST(CpuLayerNorm, RefusesMismatchedShapes) {
  auto be = make_cpu_backend();
  Tensor x = be->zeros(DType::F32, {3, 8}), out = be->alloc(DType::F32, {3, 8});
  Tensor w8 = be->zeros(DType::F32, {8}), w4 = be->zeros(DType::F32, {4});
  EXPECT_THROW(be->layer_norm(out, x, w4, w8, 1e-6f), Error);
  EXPECT_THROW(be->layer_norm(out, x, w8, w4, 1e-6f), Error);
  Tensor small = be->alloc(DType::F32, {2, 8});
  EXPECT_THROW(be->layer_norm(small, x, w8, w8, 1e-6f), Error);
}

TEST(CpuClamp, ClampsEachValueAndLeavesInfiniteSidesOpen) {
  auto be = make_cpu_backend();
  const std::vector<float> x = {-5.f, -2.5f, -1.f, 0.f, 2.49f, 2.5f, 7.f, 1e30f};
  Tensor t = device_f32(*be, x, {2, 4});
  be->clamp(t, -2.5f, 2.5f);
  EXPECT_EQ(to_vec(*be, t), (std::vector<float>{-2.5f, -2.5f, -1.f, 0.f, 2.49f, 2.5f, 2.5f, 2.5f}));
  const float inf = std::numeric_limits<float>::infinity();
  Tensor open = device_f32(*be, x, {8});
  be->clamp(open, -inf, 1.f);
  EXPECT_EQ(to_vec(*be, open), (std::vector<float>{-5.f, -2.5f, -1.f, 0.f, 1.f, 1.f, 1.f, 1.f}));
  EXPECT_THROW(be->clamp(open, 2.f, 1.f), Error);
}

}  // namespace cpu_vision_ops_test
}  // namespace tandem
