// The ops added for Gemma 3n (sub, mul, act_mul, gaussian_topk, match_rms, mix_streams,
// swap_leading_dims) against naive double loops, plus their argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace gemma3n_ops_test {

using test::device_f32;
using test::kTol;
using test::rel_err;
using test::to_vec;

double act_ref(double x, Activation act) {
  if (act == Activation::SiLU) return x / (1 + std::exp(-x));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Gemma3nOps, SubAndMulMatchNaive) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    const int R = 7, C = 33;
    auto a = test::random_vec(rng, R * C), b = test::random_vec(rng, R * C);
    auto w = test::random_vec(rng, C);
    std::vector<double> diff(R * C), prod(R * C), bprod(R * C);
    for (int i = 0; i < R * C; i++) {
      diff[size_t(i)] = double(a[size_t(i)]) - b[size_t(i)];
      prod[size_t(i)] = double(a[size_t(i)]) * b[size_t(i)];
      bprod[size_t(i)] = double(a[size_t(i)]) * w[size_t(i % C)];
    }
    Tensor ad = device_f32(*be, a, {R, C}), bd = device_f32(*be, b, {R, C});
    Tensor out = be->alloc(DType::F32, {R, C});
    be->sub(out, ad, bd);
    EXPECT_LE(rel_err(to_vec(*be, out), diff), kTol);
    be->mul(out, ad, bd);
    EXPECT_LE(rel_err(to_vec(*be, out), prod), kTol);
    be->mul(ad, ad, device_f32(*be, w, {C}));  // one row broadcast, in place
    EXPECT_LE(rel_err(to_vec(*be, ad), bprod), kTol);
    EXPECT_THROW(be->mul(out, bd, be->alloc(DType::F32, {C - 1})), Error);
    EXPECT_THROW(be->sub(out, bd, device_f32(*be, w, {C})), Error);
  }
}

TEST(Gemma3nOps, ActMulMatchesNaiveForEachActivation) {
  auto be = make_cpu_backend();
  std::mt19937 rng(5);
  const int R = 9, C = 40;
  auto a = test::random_vec(rng, R * C, -4.f, 4.f), b = test::random_vec(rng, R * C);
  for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
    std::vector<double> ref(R * C);
    for (size_t i = 0; i < ref.size(); i++) ref[i] = act_ref(a[i], act) * b[i];
    Tensor out = be->alloc(DType::F32, {R, C});
    be->act_mul(out, device_f32(*be, a, {R, C}), device_f32(*be, b, {R, C}), act);
    EXPECT_LE(rel_err(to_vec(*be, out), ref), kTol);
  }
}

std::vector<double> gaussian_topk_ref(const std::vector<float>& x, int R, int C, double k) {
  std::vector<double> out(x.size());
  for (int r = 0; r < R; r++) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++) mean += x[size_t(r * C + c)];
    mean /= C;
    for (int c = 0; c < C; c++) var += std::pow(x[size_t(r * C + c)] - mean, 2);
    const double cutoff = mean + std::sqrt(var / C) * k;
    for (int c = 0; c < C; c++)
      out[size_t(r * C + c)] = std::max(x[size_t(r * C + c)] - cutoff, 0.0);
  }
  return out;
}

TEST(Gemma3nOps, GaussianTopkMatchesNaiveAndKeepsTheTail) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    const int R = 6, C = 512;
    auto x = test::random_vec(rng, R * C, -2.f, 3.f);
    // icdf(0.95) of the standard normal: ≈ 5% of a gaussian row survives.
    for (double k : {1.6448536269514722, 0.0, -0.5}) {
      Tensor xd = device_f32(*be, x, {R, C});
      be->gaussian_topk(xd, float(k));
      auto got = to_vec(*be, xd);
      EXPECT_LE(rel_err(got, gaussian_topk_ref(x, R, C, k)), kTol);
      if (k > 1) {  // a uniform row: cutoff above mean + 1.64σ keeps well under 10%
        size_t kept = size_t(std::count_if(got.begin(), got.end(), [](float v) { return v > 0; }));
        EXPECT_GT(kept, 0u);
        EXPECT_LT(kept, size_t(R * C) / 10);
      }
    }
  }
}

TEST(Gemma3nOps, MatchRmsGivesEachRowTheReferenceMagnitude) {
  auto be = make_cpu_backend();
  std::mt19937 rng(11);
  const int R = 5, C = 64;
  auto x = test::random_vec(rng, R * C), ref = test::random_vec(rng, R * C, -3.f, 3.f);
  std::fill(x.begin(), x.begin() + C, 1e-4f);  // row 0: mean(x²) below the floor
  const double floor = 1e-5;
  std::vector<double> want(x.size());
  for (int r = 0; r < R; r++) {
    double ms_x = 0, ms_ref = 0;
    for (int c = 0; c < C; c++) {
      ms_x += double(x[size_t(r * C + c)]) * x[size_t(r * C + c)];
      ms_ref += double(ref[size_t(r * C + c)]) * ref[size_t(r * C + c)];
    }
    const double s = std::sqrt(ms_ref / C) / std::sqrt(std::max(ms_x / C, floor));
    for (int c = 0; c < C; c++) want[size_t(r * C + c)] = x[size_t(r * C + c)] * s;
  }
  Tensor xd = device_f32(*be, x, {R, C});
  be->match_rms(xd, device_f32(*be, ref, {R, C}), float(floor));
  EXPECT_LE(rel_err(to_vec(*be, xd), want), kTol);
  EXPECT_THROW(be->match_rms(xd, device_f32(*be, ref, {R * C}), 1e-5f), Error);
}

TEST(Gemma3nOps, MixStreamsAccumulatesAPerTokenMatrix) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [M, S, T, C] : {std::array{4, 4, 7, 24}, {4, 1, 3, 16}, {2, 3, 1, 5}}) {
      auto out = test::random_vec(rng, size_t(M * T * C));
      auto x = test::random_vec(rng, size_t(S * T * C));
      auto k = test::random_vec(rng, size_t(T * M * S), -2.f, 2.f);
      std::vector<double> want(out.begin(), out.end());
      for (int m = 0; m < M; m++)
        for (int t = 0; t < T; t++)
          for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int s = 0; s < S; s++)
              acc += double(k[size_t(t * M * S + m * S + s)]) * x[size_t((s * T + t) * C + c)];
            want[size_t((m * T + t) * C + c)] += acc;
          }
      Tensor od = device_f32(*be, out, {M, T, C});
      be->mix_streams(od, device_f32(*be, x, {S, T, C}), device_f32(*be, k, {T, M * S}));
      EXPECT_LE(rel_err(to_vec(*be, od), want), kTol);
      EXPECT_THROW(
          be->mix_streams(od, device_f32(*be, x, {S, T, C}), be->alloc(DType::F32, {T, M * S + 1})),
          Error);
      EXPECT_THROW(be->mix_streams(od, od, be->alloc(DType::F32, {T, M * M})), Error);
    }
  }
}

TEST(Gemma3nOps, SwapLeadingDimsTransposesBlocks) {
  auto be = make_cpu_backend();
  const int A = 3, B = 5, C = 4;
  std::vector<float> x(A * B * C);
  for (size_t i = 0; i < x.size(); i++) x[i] = float(i);
  Tensor out = be->alloc(DType::F32, {B, A, C});
  be->swap_leading_dims(out, device_f32(*be, x, {A, B, C}));
  auto got = to_vec(*be, out);
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++)
        EXPECT_EQ(got[size_t((b * A + a) * C + c)], x[size_t((a * B + b) * C + c)]);
  Tensor wrong = be->alloc(DType::F32, {A, B, C});
  EXPECT_THROW(be->swap_leading_dims(wrong, device_f32(*be, x, {A, B, C})), Error);
}

}  // namespace gemma3n_ops_test
}  // namespace tandem
