// The CUDA ops added for Gemma 3n / Gemma 4 (sub, mul, act_mul, gaussian_topk, match_rms,
// mix_streams, swap_leading_dims) against their CPU twins on fresh random inputs, in bf16
// (what the models pass) and f32 storage. Sizes are awkward on purpose: T = 1, rows that
// are not multiples of a pack (8 bf16 / 4 f32) or of a block, rows longer than a block.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_gemma_ops_test {

using test::kBf16Tol;
using test::put;
using test::put_as;
using test::rel_err_between;

const std::array<std::pair<int64_t, int64_t>, 7> kRowShapes = {
    {{1, 1}, {1, 8}, {7, 33}, {300, 128}, {5, 1001}, {3, 3000}, {2, 16384}}};

// out = op(a, b) on both backends; the GPU output starts as NaN.
template <typename Op>
void expect_binary_matches(test::Backends& be, DType dt, DType bdt, const std::vector<float>& a,
                           const std::vector<float>& b, Shape shape, Shape bshape, Op op) {
  Tensor ref = be.cpu->alloc(DType::F32, shape);
  op(*be.cpu, ref, put(*be.cpu, a, shape), put(*be.cpu, b, bshape));
  Tensor out = test::poisoned(*be.gpu, dt, shape);
  op(*be.gpu, out, put_as(*be.gpu, a, shape, dt), put_as(*be.gpu, b, bshape, bdt));
  EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
}

TEST(CudaGemmaOps, SubAndMulMatchCpuForEveryBroadcastForm) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  auto sub = [](Backend& b, Tensor& o, const Tensor& x, const Tensor& y) { b.sub(o, x, y); };
  auto mul = [](Backend& b, Tensor& o, const Tensor& x, const Tensor& y) { b.mul(o, x, y); };
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [R, C] : kRowShapes)
      for (DType dt : {DType::BF16, DType::F32})
        for (DType bdt : {DType::BF16, DType::F32}) {
          SCOPED_TRACE(testing::Message()
                       << R << "x" << C << " " << dtype_name(dt) << " b " << dtype_name(bdt));
          auto a = test::random_bf16(rng, size_t(R * C), -4.f, 4.f);
          auto b = test::random_bf16(rng, size_t(R * C), -2.f, 2.f);
          auto row = test::random_bf16(rng, size_t(C), -2.f, 2.f);
          expect_binary_matches(be, dt, bdt, a, b, {R, C}, {R, C}, sub);
          expect_binary_matches(be, dt, bdt, a, b, {R, C}, {R, C}, mul);  // same size
          expect_binary_matches(be, dt, bdt, a, row, {R, C}, {C}, mul);   // one row [C]
          expect_binary_matches(be, dt, bdt, a, row, {R, C}, {1, C}, mul);
        }
  }
}

// The models' form: mul(first, first, scale), in place with a broadcast row.
TEST(CudaGemmaOps, MulInPlaceBroadcastAndArgumentChecks) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(41);
  for (auto [R, C] : {std::pair<int64_t, int64_t>{5, 64}, {9, 35}}) {
    auto a = test::random_bf16(rng, size_t(R * C), -3.f, 3.f);
    auto w = test::random_bf16(rng, size_t(C));
    Tensor ac = put(*be.cpu, a, {R, C}), ag = put(*be.gpu, a, {R, C});
    be.cpu->mul(ac, ac, put(*be.cpu, w, {C}));
    be.gpu->mul(ag, ag, put(*be.gpu, w, {C}));
    EXPECT_LE(rel_err_between(*be.gpu, ag, *be.cpu, ac), kBf16Tol) << R << "x" << C;
    Tensor ad = put(*be.gpu, a, {R, C}), bd = put(*be.gpu, a, {R, C});
    be.gpu->sub(ad, ad, bd);  // in place: a − a = 0 exactly
    for (float v : test::to_vec(*be.gpu, ad)) ASSERT_EQ(v, 0.f);
  }
  Tensor out = be.gpu->zeros(DType::BF16, {4, 6}), a = be.gpu->zeros(DType::BF16, {4, 6});
  EXPECT_THROW(be.gpu->mul(out, a, be.gpu->zeros(DType::BF16, {5})), Error);
  EXPECT_THROW(be.gpu->sub(out, a, be.gpu->zeros(DType::BF16, {6})), Error);
  EXPECT_THROW(be.gpu->sub(out, be.gpu->zeros(DType::F32, {4, 6}), a), Error);
  EXPECT_THROW(be.gpu->act_mul(out, a, be.gpu->zeros(DType::I32, {4, 6}), Activation::SiLU), Error);
}

TEST(CudaGemmaOps, ActMulMatchesCpuForEachActivation) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(43);
  for (auto [R, C] : kRowShapes)
    for (DType dt : {DType::BF16, DType::F32})
      for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
        SCOPED_TRACE(testing::Message()
                     << R << "x" << C << " " << dtype_name(dt) << " act " << int(act));
        auto a = test::random_bf16(rng, size_t(R * C), -6.f, 6.f);
        auto b = test::random_bf16(rng, size_t(R * C), -2.f, 2.f);
        expect_binary_matches(be, dt, dt, a, b, {R, C}, {R, C},
                              [act](Backend& be_, Tensor& o, const Tensor& x, const Tensor& y) {
                                be_.act_mul(o, x, y, act);
                              });
      }
}

TEST(CudaGemmaOps, GaussianTopkMatchesCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [R, C] : kRowShapes)
      for (DType dt : {DType::BF16, DType::F32})
        // icdf(0.95) as Gemma 3n's sparse layers use, 0 (keep what is above the mean), < 0.
        for (float k : {1.6448536f, 0.f, -0.5f}) {
          SCOPED_TRACE(testing::Message() << R << "x" << C << " " << dtype_name(dt) << " k " << k);
          auto x = test::random_bf16(rng, size_t(R * C), -2.f, 3.f);
          Tensor ref = put(*be.cpu, x, {R, C});
          be.cpu->gaussian_topk(ref, k);
          Tensor xg = put_as(*be.gpu, x, {R, C}, dt);
          be.gpu->gaussian_topk(xg, k);
          EXPECT_LE(rel_err_between(*be.gpu, xg, *be.cpu, ref), kBf16Tol);
        }
  }
}

// Each row's result is the same bits whether it runs alone or among other rows.
TEST(CudaGemmaOps, GaussianTopkAndMatchRmsArePerRow) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(47);
  const int64_t R = 6, C = 2048;
  auto x = test::random_bf16(rng, size_t(R * C), -2.f, 2.f);
  auto ref = test::random_bf16(rng, size_t(R * C), -3.f, 3.f);
  Tensor all = put(*be.gpu, x, {R, C});
  be.gpu->gaussian_topk(all, 1.6448536f);
  Tensor all_rms = put(*be.gpu, x, {R, C});
  be.gpu->match_rms(all_rms, put(*be.gpu, ref, {R, C}), 1e-5f);
  const auto got = test::to_vec(*be.gpu, all), got_rms = test::to_vec(*be.gpu, all_rms);
  const std::vector<float> row(x.begin() + 3 * C, x.begin() + 4 * C);
  const std::vector<float> ref_row(ref.begin() + 3 * C, ref.begin() + 4 * C);
  Tensor one = put(*be.gpu, row, {1, C});
  be.gpu->gaussian_topk(one, 1.6448536f);
  Tensor one_rms = put(*be.gpu, row, {1, C});
  be.gpu->match_rms(one_rms, put(*be.gpu, ref_row, {1, C}), 1e-5f);
  EXPECT_EQ(test::to_vec(*be.gpu, one),
            std::vector<float>(got.begin() + 3 * C, got.begin() + 4 * C));
  EXPECT_EQ(test::to_vec(*be.gpu, one_rms),
            std::vector<float>(got_rms.begin() + 3 * C, got_rms.begin() + 4 * C));
}

TEST(CudaGemmaOps, MatchRmsMatchesCpuIncludingTheFloor) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(53);
  for (auto [R, C] : kRowShapes)
    for (DType dt : {DType::BF16, DType::F32})
      for (DType rdt : {DType::BF16, DType::F32}) {
        SCOPED_TRACE(testing::Message()
                     << R << "x" << C << " " << dtype_name(dt) << " ref " << dtype_name(rdt));
        auto x = test::random_bf16(rng, size_t(R * C), -3.f, 3.f);
        auto ref = test::random_bf16(rng, size_t(R * C), -1.f, 1.f);
        if (R > 1)  // row 0: mean(x²) ≈ 1e-8, under the 1e-5 floor
          for (int64_t c = 0; c < C; c++) x[size_t(c)] = test::random_bf16(rng, 1, 0.f, 2e-4f)[0];
        Tensor xc = put(*be.cpu, x, {R, C});
        be.cpu->match_rms(xc, put(*be.cpu, ref, {R, C}), 1e-5f);
        Tensor xg = put_as(*be.gpu, x, {R, C}, dt);
        be.gpu->match_rms(xg, put_as(*be.gpu, ref, {R, C}, rdt), 1e-5f);
        EXPECT_LE(rel_err_between(*be.gpu, xg, *be.cpu, xc), kBf16Tol);
        if (R > 1) {  // the floored row alone (it is tiny next to the others)
          Tensor row_c = xc.slice_rows(0, 1), row_g = xg.slice_rows(0, 1);
          EXPECT_LE(rel_err_between(*be.gpu, row_g, *be.cpu, row_c), kBf16Tol);
        }
      }
  Tensor x = be.gpu->zeros(DType::BF16, {3, 8});
  EXPECT_THROW(be.gpu->match_rms(x, be.gpu->zeros(DType::BF16, {24}), 1e-5f), Error);
  EXPECT_THROW(be.gpu->match_rms(x, be.gpu->zeros(DType::BF16, {3, 7}), 1e-5f), Error);
}

TEST(CudaGemmaOps, MixStreamsMatchesCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    // AltUp predict (M = S = 4), correct (S = 1, the innovation), and odd ones.
    for (auto [M, S, T, C] : {std::array<int64_t, 4>{4, 4, 7, 2048},
                              {4, 1, 5, 2048},
                              {4, 4, 1, 64},
                              {2, 3, 1, 5},
                              {3, 2, 300, 128},
                              {4, 4, 3, 1001}})
      for (DType dt : {DType::BF16, DType::F32})
        for (DType kdt : {DType::BF16, DType::F32}) {
          SCOPED_TRACE(testing::Message() << "M " << M << " S " << S << " T " << T << " C " << C
                                          << " " << dtype_name(dt) << " coefs " << dtype_name(kdt));
          auto out = test::random_bf16(rng, size_t(M * T * C), -2.f, 2.f);
          auto x = test::random_bf16(rng, size_t(S * T * C), -2.f, 2.f);
          auto k = test::random_bf16(rng, size_t(T * M * S), -1.f, 1.f);
          Tensor oc = put(*be.cpu, out, {M, T, C});
          be.cpu->mix_streams(oc, put(*be.cpu, x, {S, T, C}), put(*be.cpu, k, {T, M * S}));
          Tensor og = put_as(*be.gpu, out, {M, T, C}, dt);
          be.gpu->mix_streams(og, put_as(*be.gpu, x, {S, T, C}, dt),
                              put_as(*be.gpu, k, {T, M * S}, kdt));
          EXPECT_LE(rel_err_between(*be.gpu, og, *be.cpu, oc), kBf16Tol);
        }
  }
  Tensor out = be.gpu->zeros(DType::BF16, {4, 3, 8}), x = be.gpu->zeros(DType::BF16, {4, 3, 8});
  EXPECT_THROW(be.gpu->mix_streams(out, out, be.gpu->zeros(DType::BF16, {3, 16})), Error);
  EXPECT_THROW(be.gpu->mix_streams(out, x, be.gpu->zeros(DType::BF16, {3, 17})), Error);
  EXPECT_THROW(be.gpu->mix_streams(out, x.reshape({4, 24}), be.gpu->zeros(DType::BF16, {3, 16})),
               Error);
}

// A pure copy, so exact for every dtype and row width (16-, 4- and 2-byte word paths).
TEST(CudaGemmaOps, SwapLeadingDimsIsExactForAnyDtype) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(59);
  for (auto [dt, A, B, C] : {std::tuple{DType::BF16, 1, 1, 1},
                             {DType::BF16, 3, 5, 7},
                             {DType::BF16, 7, 35, 256},
                             {DType::BF16, 1, 30, 8},
                             {DType::F32, 3, 5, 3},
                             {DType::F32, 300, 4, 16},
                             {DType::I32, 2, 3, 5}}) {
    SCOPED_TRACE(testing::Message() << dtype_name(dt) << " A " << A << " B " << B << " C " << C);
    auto x = test::random_bf16(rng, size_t(A * B * C), -100.f, 100.f);
    for (float& v : x) v = dt == DType::I32 ? std::round(v) : v;
    Tensor xg = dt == DType::I32
                    ? test::put_i32(*be.gpu, std::vector<int32_t>(x.begin(), x.end()), {A, B, C})
                    : put_as(*be.gpu, x, {A, B, C}, dt);
    Tensor out = test::poisoned(*be.gpu, dt, {B, A, C});
    be.gpu->swap_leading_dims(out, xg);
    const auto got = test::to_vec(*be.gpu, out);
    for (int64_t a = 0; a < A; a++)
      for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++)
          ASSERT_EQ(got[size_t((b * A + a) * C + c)], x[size_t((a * B + b) * C + c)])
              << a << "," << b << "," << c;
  }
  Tensor x = be.gpu->zeros(DType::BF16, {2, 3, 4});
  Tensor same = be.gpu->zeros(DType::BF16, {2, 3, 4}), other = be.gpu->zeros(DType::F32, {3, 2, 4});
  EXPECT_THROW(be.gpu->swap_leading_dims(same, x), Error);
  EXPECT_THROW(be.gpu->swap_leading_dims(other, x), Error);
}

}  // namespace cuda_gemma_ops_test
}  // namespace tandem
