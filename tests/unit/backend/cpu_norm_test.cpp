// rms_norm, add, scale, softcap and gated_act against naive double loops.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace cpu_norm_test {

using test::device_f32;
using test::kTol;
using test::rel_err;
using test::to_vec;

std::vector<double> rms_norm_ref(const std::vector<float>& x, const std::vector<float>& w, int R,
                                 int C, double eps, double offset) {
  std::vector<double> out(x.size());
  for (int r = 0; r < R; r++) {
    double ss = 0;
    for (int c = 0; c < C; c++) ss += double(x[size_t(r * C + c)]) * x[size_t(r * C + c)];
    const double inv = 1.0 / std::sqrt(ss / C + eps);
    for (int c = 0; c < C; c++)
      out[size_t(r * C + c)] = x[size_t(r * C + c)] * inv * (w[size_t(c)] + offset);
  }
  return out;
}

TEST(CpuRmsNorm, MatchesNaiveWithBothWeightConventions) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [R, C] : {std::pair{1, 64}, {5, 24}, {9, 256}, {70, 320}}) {
      for (float offset : {0.f, 1.f}) {
        SCOPED_TRACE(testing::Message() << R << "x" << C << " offset " << offset);
        auto x = test::random_vec(rng, size_t(R * C), -3.f, 3.f);
        auto w = test::random_vec(rng, size_t(C));
        Tensor xd = device_f32(*be, x, {R, C}), wd = device_f32(*be, w, {C});
        Tensor out = be->alloc(DType::F32, {R, C});
        be->rms_norm(out, xd, wd, 1e-6f, offset);
        EXPECT_LE(rel_err(to_vec(*be, out), rms_norm_ref(x, w, R, C, 1e-6, offset)), kTol);
        be->rms_norm(xd, xd, wd, 1e-6f, offset);  // in place gives the same bits
        EXPECT_EQ(to_vec(*be, xd), to_vec(*be, out));
      }
    }
  }
}

// Qwen3-style q/k norm: [T, H, Dh] normalized per head with a [Dh] weight.
TEST(CpuRmsNorm, NormalizesEachHeadOfA3dTensor) {
  auto be = make_cpu_backend();
  std::mt19937 rng(9);
  auto x = test::random_vec(rng, 3 * 4 * 16);
  auto w = test::random_vec(rng, 16);
  Tensor out = be->alloc(DType::F32, {3, 4, 16});
  be->rms_norm(out, device_f32(*be, x, {3, 4, 16}), device_f32(*be, w, {16}), 1e-5f, 0.f);
  EXPECT_LE(rel_err(to_vec(*be, out), rms_norm_ref(x, w, 12, 16, 1e-5, 0)), kTol);
  EXPECT_THROW(be->rms_norm(out, device_f32(*be, x, {3, 4, 16}),
                            device_f32(*be, std::vector<float>(8, 1.f), {8}), 1e-5f, 0.f),
               Error);
}

TEST(CpuElementwise, AddScaleSoftcap) {
  auto be = make_cpu_backend();
  std::mt19937 rng(21);
  const int n = 1000;
  auto a = test::random_vec(rng, n, -40.f, 40.f), b = test::random_vec(rng, n);
  Tensor ad = device_f32(*be, a, {10, 100}), bd = device_f32(*be, b, {10, 100});
  Tensor out = be->alloc(DType::F32, {10, 100});
  be->add(out, ad, bd);
  std::vector<double> ref(n);
  for (int i = 0; i < n; i++) ref[size_t(i)] = double(a[size_t(i)]) + b[size_t(i)];
  EXPECT_LE(rel_err(to_vec(*be, out), ref), kTol);
  be->add(ad, ad, bd);  // in place
  EXPECT_EQ(to_vec(*be, ad), to_vec(*be, out));

  be->scale(out, -0.75f);
  for (double& r : ref) r *= -0.75;
  EXPECT_LE(rel_err(to_vec(*be, out), ref), kTol);

  be->softcap(out, 20.f);
  for (double& r : ref) r = 20.0 * std::tanh(r / 20.0);
  EXPECT_LE(rel_err(to_vec(*be, out), ref), kTol);
  const auto capped = to_vec(*be, out);
  for (float v : capped) EXPECT_LT(std::abs(v), 20.f);

  EXPECT_THROW(be->add(out, ad, be->zeros(DType::F32, {7})), Error);
  EXPECT_THROW(be->softcap(out, 0.f), Error);
}

double silu_ref(double x) {
  return x / (1 + std::exp(-x));
}
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(CpuGatedAct, SiluAndGeluTanhTimesUp) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [T, F] : {std::pair{1, 8}, {7, 40}, {33, 128}}) {
      auto gu = test::random_vec(rng, size_t(T * 2 * F), -6.f, 6.f);
      Tensor out = be->alloc(DType::F32, {T, F});
      for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
        be->gated_act(out, device_f32(*be, gu, {T, 2 * F}), act);
        std::vector<double> ref(size_t(T * F));
        for (int t = 0; t < T; t++)
          for (int i = 0; i < F; i++) {
            const double g = gu[size_t(t * 2 * F + i)], u = gu[size_t(t * 2 * F + F + i)];
            ref[size_t(t * F + i)] = (act == Activation::SiLU ? silu_ref(g) : gelu_tanh_ref(g)) * u;
          }
        EXPECT_LE(rel_err(to_vec(*be, out), ref), kTol) << "act " << int(act);
      }
    }
  }
  Tensor out = be->alloc(DType::F32, {2, 5});
  EXPECT_THROW(be->gated_act(out, be->zeros(DType::F32, {2, 8}), Activation::SiLU), Error);
}

// Big enough to use the pool: results must not depend on the thread count.
TEST(CpuThreads, RowOpsAreBitIdenticalAcrossThreadCounts) {
  ThreadPool one(1), four(4);
  CpuBackend a(&one), b(&four);
  std::mt19937 rng(77);
  const int R = 300, C = 512;
  auto x = test::random_vec(rng, size_t(R * C), -3.f, 3.f);
  auto w = test::random_vec(rng, size_t(C));
  auto gu = test::random_vec(rng, size_t(R * C), -6.f, 6.f);
  std::vector<std::vector<float>> results[2];
  for (int i = 0; i < 2; i++) {
    CpuBackend& be = i == 0 ? a : b;
    Tensor out = be.alloc(DType::F32, {R, C});
    be.rms_norm(out, device_f32(be, x, {R, C}), device_f32(be, w, {C}), 1e-6f, 1.f);
    results[i].push_back(to_vec(be, out));
    Tensor act = be.alloc(DType::F32, {R, C / 2});
    be.gated_act(act, device_f32(be, gu, {R, C}), Activation::GeluTanh);
    results[i].push_back(to_vec(be, act));
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace cpu_norm_test
}  // namespace tandem
