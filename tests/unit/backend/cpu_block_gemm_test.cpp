// The ggml block-type products (cpu_block_gemm.h) on every type and every instruction set the
// machine runs, against their twins on fresh random weights:
//   Exact — bit for bit gemm_xwt over the weights decoded by dequantize_row (in registers and
//           widened once alike);
//   Int8  — the f64 product of the decoded weights and the activations as the kernels quantize
//           them (quantize_block_acts), to f32 round-off; and near Exact;
// and both give a row the same bits whatever the other rows of the step and the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_block_gemm.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend_test_util.h"
#include "core/block_quant.h"
#include "core/error.h"

namespace tandem {
namespace cpu_block_gemm_test {

using cpu::BlockArithmetic;

constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0,   DType::Q5_1,
                            DType::Q8_0, DType::Q2_K, DType::Q3_K,   DType::Q4_K,
                            DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

std::vector<CpuIsa> isas() {
  std::vector<CpuIsa> v{CpuIsa::Avx2};
  if (cpu_max_isa() >= CpuIsa::Avx512) v.push_back(CpuIsa::Avx512);
  return v;
}

// A random [N, K] weight in blocks of t (from normal values, so every level is used) and its
// decoded f32 values.
struct BlockWeight {
  std::vector<uint8_t> blocks;
  std::vector<float> values;
};

BlockWeight random_weight(DType t, int64_t N, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.05f);
  std::vector<float> w(size_t(N * K));
  for (float& v : w) v = dist(rng);
  BlockWeight b;
  const size_t row = dtype_row_bytes(t, K);
  b.blocks.resize(row * size_t(N));
  b.values.resize(w.size());
  for (int64_t n = 0; n < N; n++) {
    quantize_row(t, w.data() + n * K, b.blocks.data() + n * row, K);
    dequantize_row(t, b.blocks.data() + n * row, b.values.data() + n * K, K);
  }
  return b;
}

// The product through the row kernels, or with panels (cpu_block_panels.h) packed from w.
std::vector<float> block_product(ThreadPool& pool, const std::vector<float>& x,
                                 const BlockWeight& w, DType t, int64_t M, int64_t N, int64_t K,
                                 BlockArithmetic a, CpuIsa isa, bool panels = false) {
  std::vector<float> out(size_t(M * N), std::nanf(""));
  std::vector<uint8_t> packed;
  if (panels) {
    packed.resize(cpu::block_panels_bytes(t, N, K));
    cpu::pack_block_panels(pool, t, w.blocks.data(), N, K, packed.data());
  }
  cpu::block_gemm_xwt(pool, out.data(), x.data(), w.blocks.data(), t, M, N, K, a, isa,
                      panels ? packed.data() : nullptr);
  return out;
}

// The Int8 product's twin: f64 sums of the decoded weights times the quantized activations
// (q · d), plus each output's scale Σ |w · x'| for the tolerance.
void int8_twin(ThreadPool& pool, const std::vector<float>& x, const BlockWeight& w, DType t,
               int64_t M, int64_t N, int64_t K, std::vector<double>& ref,
               std::vector<double>& mag) {
  cpu::QuantizedActs acts;
  cpu::quantize_block_acts(pool, x.data(), M, K, cpu::block_act_elems(t), acts);
  ref.assign(size_t(M * N), 0.0);
  mag.assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) {
        const double xq = double(acts.q[size_t(m * K + k)]) *
                          acts.d[size_t(m * (K / acts.act_block) + k / acts.act_block)];
        const double p = double(w.values[size_t(n * K + k)]) * xq;
        ref[size_t(m * N + n)] += p;
        mag[size_t(m * N + n)] += std::fabs(p);
      }
}

struct Case {
  int64_t M, N, K;
};

// Ks of one and several blocks of 256 (every type), Ms on both sides of exact_widen_rows and
// of the panel kernels' tiles (4 rows on AVX-512, 2 on AVX2), Ns of whole panels of 16 rows,
// of panels and rows past them, and of rows alone.
constexpr Case kCases[] = {{1, 37, 256}, {3, 20, 512},  {5, 9, 768},  {17, 13, 512},
                           {7, 48, 768}, {2, 32, 1024}, {66, 17, 256}};

TEST(CpuBlockGemm, ExactIsTheF32GemmOverTheDecodedWeights) {
  ThreadPool pool(3);
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (DType t : kTypes)
      for (const Case& c : kCases) {
        const BlockWeight w = random_weight(t, c.N, c.K, rng);
        const std::vector<float> x = test::random_vec(rng, size_t(c.M * c.K));
        for (CpuIsa isa : isas()) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << cpu_isa_name(isa)
                                          << " M=" << c.M << " N=" << c.N << " K=" << c.K);
          std::vector<float> ref(size_t(c.M * c.N));
          cpu::gemm_xwt(pool, ref.data(), x.data(), w.values.data(), DType::F32, c.M, c.N, c.K,
                        {isa});
          const std::vector<float> got =
              block_product(pool, x, w, t, c.M, c.N, c.K, BlockArithmetic::Exact, isa);
          ASSERT_EQ(std::memcmp(got.data(), ref.data(), got.size() * 4), 0);
        }
      }
  }
}

TEST(CpuBlockGemm, Int8IsItsTwinToRoundOffAndNearExact) {
  ThreadPool pool(3);
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (DType t : kTypes)
      for (const Case& c : kCases) {
        const BlockWeight w = random_weight(t, c.N, c.K, rng);
        const std::vector<float> x = test::random_vec(rng, size_t(c.M * c.K));
        std::vector<double> ref, mag;
        int8_twin(pool, x, w, t, c.M, c.N, c.K, ref, mag);
        std::vector<float> exact(size_t(c.M * c.N));
        cpu::gemm_xwt(pool, exact.data(), x.data(), w.values.data(), DType::F32, c.M, c.N, c.K);
        for (CpuIsa isa : isas()) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << cpu_isa_name(isa)
                                          << " M=" << c.M << " N=" << c.N << " K=" << c.K);
          for (bool panels : {false, true}) {
            SCOPED_TRACE(panels ? "panels" : "rows");
            const std::vector<float> got =
                block_product(pool, x, w, t, c.M, c.N, c.K, BlockArithmetic::Int8, isa, panels);
            for (size_t i = 0; i < got.size(); i++)
              ASSERT_NEAR(got[i], ref[i], 2e-6 * mag[i] + 1e-7) << "output " << i;
            EXPECT_LT(test::rel_err(got, exact), 2e-2);
          }
        }
      }
  }
}

// Row m's outputs are the same bits alone, in a step of 17 rows, and on 1 or 3 threads (with
// panels too: 16 of the 39 weight rows past the panels).
TEST(CpuBlockGemm, RowsDoNotDependOnTheStepOrTheThreads) {
  ThreadPool one(1), three(3);
  std::mt19937 rng(11);
  const int64_t M = 17, N = 39, K = 512;
  for (DType t : kTypes) {
    const BlockWeight w = random_weight(t, N, K, rng);
    const std::vector<float> x = test::random_vec(rng, size_t(M * K));
    for (CpuIsa isa : isas())
      for (BlockArithmetic a : {BlockArithmetic::Exact, BlockArithmetic::Int8})
        for (bool p : {false, true}) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << cpu_isa_name(isa) << " "
                                          << cpu::block_arithmetic_name(a) << (p ? " panels" : ""));
          const std::vector<float> all = block_product(three, x, w, t, M, N, K, a, isa, p);
          const std::vector<float> serial = block_product(one, x, w, t, M, N, K, a, isa, p);
          ASSERT_EQ(std::memcmp(all.data(), serial.data(), all.size() * 4), 0);
          for (int64_t m : {int64_t(0), int64_t(5), M - 1}) {
            const std::vector<float> xm(x.begin() + m * K, x.begin() + (m + 1) * K);
            const std::vector<float> solo = block_product(three, xm, w, t, 1, N, K, a, isa, p);
            ASSERT_EQ(std::memcmp(solo.data(), all.data() + m * N, size_t(N) * 4), 0)
                << "row " << m;
          }
        }
  }
}

TEST(CpuBlockGemm, ArithmeticNamesRoundTrip) {
  for (BlockArithmetic a : {BlockArithmetic::Exact, BlockArithmetic::Int8})
    EXPECT_EQ(cpu::block_arithmetic_from_name(cpu::block_arithmetic_name(a)), a);
  EXPECT_EQ(cpu::block_arithmetic_from_name("fast"), std::nullopt);
}

TEST(CpuBlockGemm, RefusesRowsOfPartialBlocks) {
  ThreadPool pool(1);
  std::vector<uint8_t> w(4096);
  std::vector<float> x(300), out(4);
  try {
    cpu::block_gemm_xwt(pool, out.data(), x.data(), w.data(), DType::Q4_K, 1, 2, 160,
                        BlockArithmetic::Exact);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("160"), std::string::npos) << e.what();
  }
}

}  // namespace cpu_block_gemm_test
}  // namespace tandem
