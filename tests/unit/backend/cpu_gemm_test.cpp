// The GEMM kernels (cpu_gemm.h) against a naive double loop over the widened weights, on
// every instruction set this machine runs (AVX2 always, AVX-512 where present), every
// weight dtype (e4m3 too: its values, unscaled) and both paths, over shapes that hit every
// tile and tail; plus the promises the engine relies on: a row's result does not depend
// on the other rows or on the thread count, and no weight is read past the tensor's end.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend_test_util.h"
#include "core/cpu_features.h"

namespace tandem {
namespace cpu_gemm_test {

using cpu::GemmOptions;
using cpu::GemmPath;

std::vector<CpuIsa> isas_here() {
  std::vector<CpuIsa> isas{CpuIsa::Avx2};
  if (cpu_max_isa() >= CpuIsa::Avx512) isas.push_back(CpuIsa::Avx512);
  return isas;
}

// w rounded to `dtype`: the stored bits, and the f32 values they stand for.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Weights make_weights(const std::vector<float>& w, DType dtype) {
  Weights out;
  out.bytes.resize(w.size() * dtype_size(dtype));
  convert_from_f32(w.data(), out.bytes.data(), dtype, w.size());
  out.values.resize(w.size());
  convert_to_f32(out.bytes.data(), dtype, out.values.data(), w.size());
  return out;
}

// out[m, n] = Σ_k x[m, k] w[n, k], in double.
std::vector<double> gemm_ref(const std::vector<float>& x, const std::vector<float>& w, int64_t M,
                             int64_t N, int64_t K) {
  std::vector<double> out(size_t(M * N));
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += double(x[size_t(m * K + k)]) * w[size_t(n * K + k)];
      out[size_t(m * N + n)] = s;
    }
  return out;
}

struct Shape3 {
  int64_t M, N, K;
};

std::string trace(CpuIsa isa, DType d, GemmPath p, Shape3 s) {
  return std::string(cpu_isa_name(isa)) + " " + std::string(dtype_name(d)) +
         (p == GemmPath::Blas ? " blas" : " kernels") + " M=" + std::to_string(s.M) +
         " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K);
}

TEST(CpuGemm, MatchesNaiveOnEveryIsaDtypeAndPath) {
  ThreadPool pool(3);
  const std::vector<Shape3> shapes = {{1, 1, 1},     {1, 9, 7},    {2, 5, 16},   {3, 17, 31},
                                      {4, 8, 32},    {5, 13, 33},  {7, 70, 100}, {16, 64, 768},
                                      {17, 130, 48}, {33, 40, 65}, {1, 300, 257}};
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (Shape3 s : shapes) {
      const auto x = test::random_vec(rng, size_t(s.M * s.K));
      const auto w = test::random_vec(rng, size_t(s.N * s.K));
      for (DType d : {DType::BF16, DType::F16, DType::F32, DType::F8E4M3}) {
        const Weights wd = make_weights(w, d);
        const auto ref = gemm_ref(x, wd.values, s.M, s.N, s.K);
        for (CpuIsa isa : isas_here())
          for (GemmPath path : {GemmPath::Kernels, GemmPath::Blas}) {
            SCOPED_TRACE(trace(isa, d, path, s));
            std::vector<float> out(size_t(s.M * s.N), -7.f);
            cpu::gemm_xwt(pool, out.data(), x.data(), wd.bytes.data(), d, s.M, s.N, s.K,
                          GemmOptions{isa, path});
            EXPECT_LE(test::rel_err(out, ref), test::kTol);
          }
      }
    }
  }
}

// Row r of an M-row product has the bits of the same row computed alone, and the
// thread count changes nothing: the batch-invariance gate rests on this.
TEST(CpuGemm, RowsAreIndependentOfTheBatchAndTheThreads) {
  ThreadPool one(1), four(4);
  std::mt19937 rng(11);
  const int64_t M = 13, N = 91, K = 200;
  const auto x = test::random_vec(rng, size_t(M * K));
  const Weights wd = make_weights(test::random_vec(rng, size_t(N * K)), DType::BF16);
  for (CpuIsa isa : isas_here()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    const GemmOptions opt{isa, GemmPath::Kernels};
    std::vector<float> all(size_t(M * N)), all_one_thread(size_t(M * N));
    cpu::gemm_xwt(four, all.data(), x.data(), wd.bytes.data(), DType::BF16, M, N, K, opt);
    cpu::gemm_xwt(one, all_one_thread.data(), x.data(), wd.bytes.data(), DType::BF16, M, N, K, opt);
    EXPECT_EQ(all, all_one_thread);
    for (int64_t r = 0; r < M; r++) {
      std::vector<float> alone(static_cast<size_t>(N));
      cpu::gemm_xwt(four, alone.data(), x.data() + r * K, wd.bytes.data(), DType::BF16, 1, N, K,
                    opt);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + r * N)) << "row " << r;
    }
  }
}

// The same values stored as bf16 or as f32 give the same bits (the kernels widen every
// dtype in k order): a checkpoint converted to f32 computes exactly what its bf16 did.
TEST(CpuGemm, StorageDtypeDoesNotChangeTheBits) {
  ThreadPool pool(2);
  std::mt19937 rng(8);
  const int64_t M = 6, N = 37, K = 131;
  const auto x = test::random_vec(rng, size_t(M * K));
  const Weights bf16 = make_weights(test::random_vec(rng, size_t(N * K)), DType::BF16);
  for (CpuIsa isa : isas_here()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    std::vector<float> a(size_t(M * N)), b(size_t(M * N));
    cpu::gemm_xwt(pool, a.data(), x.data(), bf16.bytes.data(), DType::BF16, M, N, K, {isa});
    cpu::gemm_xwt(pool, b.data(), x.data(), bf16.values.data(), DType::F32, M, N, K, {isa});
    EXPECT_EQ(a, b);
  }
}

// e4m3 weights widen to their exact values — every one of the 256 codes, subnormals, ±0
// and NaN included — so an FP8 product has the bits of the f32 product over the decoded
// values (the FP8 linear's sum of exact products rests on this); in registers for few x
// rows and through a bf16 copy of each block for many (cpu_gemm.cpp).
TEST(CpuGemm, E4m3WeightsWidenToTheirExactValues) {
  ThreadPool pool(2);
  const int64_t N = 256, K = 37;  // code n at column n % K of row n, zeros elsewhere
  std::vector<uint8_t> w(size_t(N * K), 0);
  for (int64_t n = 0; n < N; n++) w[size_t(n * K + n % K)] = uint8_t(n);
  std::vector<float> wf(w.size());
  convert_to_f32(w.data(), DType::F8E4M3, wf.data(), w.size());
  std::mt19937 rng(3);
  for (int64_t M : {3, 40}) {
    for (CpuIsa isa : isas_here()) {
      SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " M=" + std::to_string(M));
      auto x = test::random_vec(rng, size_t(M * K));
      for (int64_t k = 0; k < K; k++) x[size_t(k)] = 1.f;  // row 0 reads each value alone
      std::vector<float> got(size_t(M * N)), want(size_t(M * N));
      cpu::gemm_xwt(pool, got.data(), x.data(), w.data(), DType::F8E4M3, M, N, K, {isa});
      cpu::gemm_xwt(pool, want.data(), x.data(), wf.data(), DType::F32, M, N, K, {isa});
      for (int64_t i = 0; i < M * N; i++) {
        if (std::isnan(want[size_t(i)])) {
          EXPECT_TRUE(std::isnan(got[size_t(i)])) << "row " << i / N << " code " << i % N;
        } else {
          EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "row " << i / N << " code " << i % N;
        }
      }
      for (int64_t n = 0; n < N; n++) {
        if (n == 0x7f || n == 0xff) continue;
        EXPECT_EQ(got[size_t(n)], f8e4m3_to_f32(uint8_t(n))) << "code " << n;
      }
    }
  }
}

// Block-scaled e4m3 (gemm_xwt_e4m3_blocks) has the bits of the f32 GEMM over W' = Wq · s
// written out, for any block shape, ragged edges included.
TEST(CpuGemm, E4m3BlocksEqualTheExpandedWeights) {
  ThreadPool pool(2);
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> v(-400.f, 400.f), sv(1e-3f, 3e-3f);
  for (auto [bn, bk] : {std::pair<int64_t, int64_t>{128, 128}, {1, 32}, {16, 64}})
    for (Shape3 sh : std::vector<Shape3>{{1, 130, 300}, {3, 17, 64}, {5, 200, 100}}) {
      const int64_t NB = (sh.N + bn - 1) / bn, KB = (sh.K + bk - 1) / bk;
      std::vector<uint8_t> w(size_t(sh.N * sh.K));
      for (auto& b : w) b = f32_to_f8e4m3(v(rng));
      std::vector<float> s(size_t(NB * KB)), wide(w.size());
      for (float& f : s) f = sv(rng);
      for (int64_t n = 0; n < sh.N; n++)
        for (int64_t k = 0; k < sh.K; k++)
          wide[size_t(n * sh.K + k)] = f8e4m3_to_f32(w[size_t(n * sh.K + k)]) * s[size_t(n / bn * KB + k / bk)];
      const auto x = test::random_vec(rng, size_t(sh.M * sh.K));
      for (CpuIsa isa : isas_here()) {
        SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " block " + std::to_string(bn) + "x" +
                     std::to_string(bk) + " M=" + std::to_string(sh.M) + " N=" + std::to_string(sh.N) +
                     " K=" + std::to_string(sh.K));
        std::vector<float> got(size_t(sh.M * sh.N)), want(size_t(sh.M * sh.N));
        cpu::gemm_xwt_e4m3_blocks(pool, got.data(), x.data(), w.data(), s.data(), bn, bk, sh.M, sh.N,
                                  sh.K, isa);
        cpu::gemm_xwt(pool, want.data(), x.data(), wide.data(), DType::F32, sh.M, sh.N, sh.K, {isa});
        EXPECT_EQ(got, want);
      }
    }
}

// Weights that end where an unreadable page begins: a kernel reading past the last
// row's end would fault. K is odd so every row ends inside a chunk.
TEST(CpuGemm, NeverReadsPastTheWeights) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* region =
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(region) + page, page, PROT_NONE), 0);
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const int64_t M = 3, N = 5, K = 37;
  const auto x = test::random_vec(rng, size_t(M * K));
  for (DType d : {DType::BF16, DType::F16, DType::F32, DType::F8E4M3}) {
    const Weights wd = make_weights(test::random_vec(rng, size_t(N * K)), d);
    char* w = static_cast<char*>(region) + page - wd.bytes.size();
    std::memcpy(w, wd.bytes.data(), wd.bytes.size());
    const auto ref = gemm_ref(x, wd.values, M, N, K);
    for (CpuIsa isa : isas_here()) {
      SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " " + std::string(dtype_name(d)));
      std::vector<float> out(size_t(M * N));
      cpu::gemm_xwt(pool, out.data(), x.data(), w, d, M, N, K, GemmOptions{isa, GemmPath::Kernels});
      EXPECT_LE(test::rel_err(out, ref), test::kTol);
    }
  }
  munmap(region, 2 * page);
}

// The op: linear over 16-bit weights as uploaded, with a bias, matches the same f32 math.
TEST(CpuGemm, LinearTakesSixteenBitWeights) {
  auto be = make_cpu_backend();
  std::mt19937 rng(21);
  const int64_t T = 6, K = 96, N = 40;
  const auto x = test::random_vec(rng, size_t(T * K));
  const auto w = test::random_vec(rng, size_t(N * K));
  const auto bias = test::random_vec(rng, size_t(N));
  for (DType d : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(d));
    const Weights wd = make_weights(w, d);
    Tensor host = Tensor::empty_host(d, {N, K});
    std::memcpy(host.data, wd.bytes.data(), wd.bytes.size());
    ASSERT_EQ(be->weight_dtype(d), d);
    Tensor wt = be->upload(host, be->weight_dtype(d));
    ASSERT_EQ(wt.dtype, d);
    Tensor out = be->alloc(DType::F32, {T, N});
    be->linear(out, test::device_f32(*be, x, {T, K}), Linear{wt, test::device_f32(*be, bias, {N})});
    auto ref = gemm_ref(x, wd.values, T, N, K);
    for (int64_t t = 0; t < T; t++)
      for (int64_t n = 0; n < N; n++) ref[size_t(t * N + n)] += bias[size_t(n)];
    EXPECT_LE(test::rel_err(test::to_vec(*be, out), ref), test::kTol);
  }
  EXPECT_EQ(be->weight_dtype(DType::F32), DType::F32);
  // FP8 weights stay e4m3, read with their scales by the FP8 linear (cpu_linear_fp8.cpp).
  EXPECT_EQ(be->weight_dtype(DType::F8E4M3), DType::F8E4M3);
}

}  // namespace cpu_gemm_test
}  // namespace tandem
