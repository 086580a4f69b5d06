// The CPU twin of the FP8 linears against the declared W8A8 arithmetic written out
// naively in double: per row (per block_k columns for block weights) s_x = amax / 448 or
// the static scale, xq = e4m3(x / s_x), y = Σ_g s_x · s_w(n, g) · Σ_{k∈g} xq · wq (+ b).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tandem {
namespace cpu_linear_fp8_test {

struct Case {
  ScaleGranularity granularity;
  int block_n, block_k;
  bool static_input;
};

std::vector<double> naive(const std::vector<float>& x, const std::vector<uint8_t>& w,
                          const std::vector<float>& s, const std::vector<float>& bias, int64_t T,
                          int64_t N, int64_t K, const Case& c, float static_scale) {
  const bool block = c.granularity == ScaleGranularity::Block;
  const int64_t group = block ? c.block_k : K, KB = (K + group - 1) / group;
  std::vector<double> y(size_t(T * N), 0.0);
  for (int64_t t = 0; t < T; t++)
    for (int64_t g = 0; g < KB; g++) {
      const int64_t k0 = g * group, k1 = std::min(K, k0 + group);
      double amax = 0;
      for (int64_t k = k0; k < k1; k++) amax = std::max(amax, std::fabs(double(x[t * K + k])));
      const double sx = c.static_input ? static_scale : std::max(amax, 1e-12) / 448.0;
      for (int64_t n = 0; n < N; n++) {
        double sum = 0;
        for (int64_t k = k0; k < k1; k++)
          sum += double(f8e4m3_to_f32(f32_to_f8e4m3(float(x[t * K + k] / sx)))) * f8e4m3_to_f32(w[n * K + k]);
        const double sw = c.granularity == ScaleGranularity::PerTensor ? s[0]
                          : c.granularity == ScaleGranularity::PerChannel
                              ? s[n]
                              : s[(n / c.block_n) * KB + g];
        y[t * N + n] += sum * sx * sw;
      }
    }
  for (int64_t t = 0; t < T; t++)
    for (int64_t n = 0; n < N; n++) y[t * N + n] += bias.empty() ? 0.0 : bias[n];
  return y;
}

TEST(CpuLinearFp8, ComputesTheDeclaredScheme) {
  auto be = make_cpu_backend();
  std::mt19937 rng(8);
  const Case cases[] = {{ScaleGranularity::PerTensor, 0, 0, false},
                        {ScaleGranularity::PerTensor, 0, 0, true},
                        {ScaleGranularity::PerChannel, 0, 0, false},
                        {ScaleGranularity::PerChannel, 0, 0, true},
                        {ScaleGranularity::Block, 128, 128, false},
                        {ScaleGranularity::Block, 1, 128, false},
                        {ScaleGranularity::Block, 16, 32, false}};
  for (const Case& c : cases)
    for (auto [T, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 130, 200}, {5, 64, 256}, {3, 7, 40},
                           {130, 70, 300}}) {
      SCOPED_TRACE(testing::Message() << "granularity " << int(c.granularity) << " static "
                                      << c.static_input << " T " << T << " N " << N << " K " << K);
      std::vector<float> x = test::random_vec(rng, size_t(T * K), -3.f, 3.f);
      std::vector<uint8_t> w(size_t(N * K));
      std::uniform_real_distribution<float> v(-400.f, 400.f), sv(1e-3f, 3e-3f);
      for (auto& b : w) b = f32_to_f8e4m3(v(rng));
      const bool block = c.granularity == ScaleGranularity::Block;
      const int64_t ns = c.granularity == ScaleGranularity::PerTensor ? 1
                         : !block ? N
                                  : ((N + c.block_n - 1) / c.block_n) * ((K + c.block_k - 1) / c.block_k);
      std::vector<float> s(static_cast<size_t>(ns)), bias = test::random_vec(rng, size_t(N));
      for (float& f : s) f = sv(rng);
      Linear l;
      Tensor wh = Tensor::empty_host(DType::F8E4M3, {N, K});
      std::copy(w.begin(), w.end(), wh.ptr<uint8_t>());
      l.weight = be->upload(wh, DType::F8E4M3);
      l.bias = be->upload(test::host_f32(bias, {N}), DType::F32);
      l.quant = LinearQuant{.granularity = c.granularity,
                            .weight_scale = be->upload(test::host_f32(s, {ns}), DType::F32),
                            .block_n = c.block_n,
                            .block_k = c.block_k,
                            .input = c.static_input ? InputScaling::Static : InputScaling::Dynamic};
      if (c.static_input) l.quant->input_scale = be->upload(test::host_f32({0.01f}, {1}), DType::F32);
      Tensor out = be->alloc(DType::F32, {T, N});
      be->linear(out, be->upload(test::host_f32(x, {T, K}), DType::F32), l);
      EXPECT_LE(test::rel_err(test::to_vec(*be, out), naive(x, w, s, bias, T, N, K, c, 0.01f)), 1e-5);
    }
}

// A row's result does not depend on the rows beside it, though few rows and many take
// different paths (the bytes widened in registers, or widened / expanded once per call):
// the batch gate rests on this.
TEST(CpuLinearFp8, RowsDoNotDependOnTheBatch) {
  auto be = make_cpu_backend();
  std::mt19937 rng(17);
  const int64_t T = 140, N = 150, K = 320;
  const std::vector<float> x = test::random_vec(rng, size_t(T * K), -3.f, 3.f);
  Tensor wh = Tensor::empty_host(DType::F8E4M3, {N, K});
  std::uniform_real_distribution<float> v(-400.f, 400.f), sv(1e-3f, 3e-3f);
  for (int64_t i = 0; i < N * K; i++) wh.ptr<uint8_t>()[i] = f32_to_f8e4m3(v(rng));
  const Case cases[] = {{ScaleGranularity::PerChannel, 0, 0, false},
                        {ScaleGranularity::Block, 128, 128, false},
                        {ScaleGranularity::Block, 16, 32, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "granularity " << int(c.granularity) << " block " << c.block_n);
    const bool block = c.granularity == ScaleGranularity::Block;
    const int64_t ns = !block ? N : ((N + c.block_n - 1) / c.block_n) * ((K + c.block_k - 1) / c.block_k);
    std::vector<float> s(static_cast<size_t>(ns));
    for (float& f : s) f = sv(rng);
    Linear l{.weight = be->upload(wh, DType::F8E4M3)};
    l.quant = LinearQuant{.granularity = c.granularity,
                          .weight_scale = be->upload(test::host_f32(s, {ns}), DType::F32),
                          .block_n = c.block_n,
                          .block_k = c.block_k,
                          .input = InputScaling::Dynamic};
    auto run = [&](int64_t t0, int64_t rows) {
      Tensor out = be->alloc(DType::F32, {rows, N});
      std::vector<float> part(x.begin() + t0 * K, x.begin() + (t0 + rows) * K);
      be->linear(out, be->upload(test::host_f32(part, {rows, K}), DType::F32), l);
      return test::to_vec(*be, out);
    };
    const std::vector<float> all = run(0, T);
    for (int64_t t : {int64_t(0), int64_t(7), T - 1}) {
      const std::vector<float> alone = run(t, 1);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + t * N)) << "row " << t;
    }
    const std::vector<float> four = run(8, 4);
    EXPECT_TRUE(std::equal(four.begin(), four.end(), all.begin() + 8 * N)) << "rows 8-11";
  }
}

// set_fp8_inputs_bf16 (the CUDA gate's yardstick): the twin then computes on bf16(x),
// exactly what it computes when handed bf16(x), and bf16 rounding ahead of e4m3 moves
// some quotients to a neighbouring e4m3 value.
TEST(CpuLinearFp8, Bf16InputsAreRoundedBeforeQuantizing) {
  CpuBackend plain, rounding;
  rounding.set_fp8_inputs_bf16(true);
  std::mt19937 rng(11);
  const int64_t T = 4, N = 96, K = 256;
  std::vector<float> x = test::random_vec(rng, size_t(T * K), -3.f, 3.f), xr = x;
  for (float& v : xr) v = bf16_to_f32(f32_to_bf16(v));
  Tensor wh = Tensor::empty_host(DType::F8E4M3, {N, K});
  std::uniform_real_distribution<float> v(-400.f, 400.f);
  for (int64_t i = 0; i < N * K; i++) wh.ptr<uint8_t>()[i] = f32_to_f8e4m3(v(rng));
  auto run = [&](CpuBackend& be, const std::vector<float>& in) {
    Linear l;
    l.weight = be.upload(wh, DType::F8E4M3);
    l.quant = LinearQuant{.granularity = ScaleGranularity::PerTensor,
                          .weight_scale = be.upload(test::host_f32({2e-3f}, {1}), DType::F32),
                          .input = InputScaling::Dynamic};
    Tensor out = be.alloc(DType::F32, {T, N});
    be.linear(out, be.upload(test::host_f32(in, {T, K}), DType::F32), l);
    return test::to_vec(be, out);
  };
  EXPECT_EQ(run(rounding, x), run(plain, xr));
  EXPECT_EQ(run(rounding, xr), run(plain, xr));
  EXPECT_NE(run(plain, x), run(plain, xr));
}

TEST(CpuLinearFp8, RefusesMismatchedScalesAndFp8ElsewhereThanLinear) {
  auto be = make_cpu_backend();
  Tensor wh = Tensor::empty_host(DType::F8E4M3, {4, 8});
  Linear l{.weight = be->upload(wh, DType::F8E4M3)};
  l.quant = LinearQuant{.granularity = ScaleGranularity::PerChannel,
                        .weight_scale = be->upload(test::host_f32({1.f, 1.f}, {2}), DType::F32),
                        .input = InputScaling::Dynamic};
  Tensor out = be->alloc(DType::F32, {1, 4});
  Tensor x = be->upload(test::host_f32(std::vector<float>(8, 1.f), {1, 8}), DType::F32);
  EXPECT_THROW(be->linear(out, x, l), Error);  // 2 scales for 4 channels
  Linear unscaled{.weight = l.weight};
  EXPECT_THROW(be->linear(out, x, unscaled), Error);  // an FP8 weight without its scales
}

}  // namespace cpu_linear_fp8_test
}  // namespace tandem
