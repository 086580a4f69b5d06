#include "backend/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_gemm_kernels.h"
#include "core/error.h"

namespace tandem::cpu {

namespace {

// A weight block this size stays in a core's L2 (1 MiB on the machines measured) beside
// the x rows and the outputs it serves.
constexpr int64_t kBlockBytes = 256 << 10;

WeightType weight_type(DType d) {
  switch (d) {
    case DType::BF16: return WeightType::BF16;
    case DType::F16: return WeightType::F16;
    case DType::F32: return WeightType::F32;
    case DType::F8E4M3: return WeightType::E4M3;
    default: fail("gemm: weights of dtype {} are not supported (bf16, f16, f32 or e4m3)", dtype_name(d));
  }
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// From this many x rows e4m3 weights are widened to bf16 once per block (in L2) for the
// 16-bit tiles, instead of in registers by every group of x rows (MR of them): e4m3 takes
// several times the instructions of bf16 to widen. The llama-100m layers' 88 MB of e4m3, one
// thread, at 8 / 16 / 64 rows: AVX-512 20.9 / 41 / 168 ms in registers against 22.5 / 35 /
// 106 once; AVX2 (two rows a group) 38-47 / 75 / 300 against 29-35 / 46 / 146. Every e4m3
// value is exact in bf16 and the tiles' bits do not depend on the storage dtype, so both
// ways give the same bits.
int64_t widen_e4m3_rows(CpuIsa isa) { return isa == CpuIsa::Avx512 ? 16 : 8; }

// Weight rows per block (a multiple of 8): small enough for L2, and at least four blocks
// per thread, so the pool can even out a thread that runs slow.
int64_t block_rows(int64_t N, int64_t K, int64_t elem_bytes, int num_threads) {
  const int64_t fit = std::max<int64_t>(8, kBlockBytes / (K * elem_bytes) / 8 * 8);
  const int64_t spread = std::max<int64_t>(8, ceil_div(ceil_div(N, 4 * int64_t(num_threads)), 8) * 8);
  return std::min(fit, spread);
}

// xp [M, kp] = x [M, K] zero-padded to kp (a whole number of kernel chunks).
void pack_rows(float* xp, const float* x, int64_t r0, int64_t r1, int64_t K, int64_t kp) {
  for (int64_t r = r0; r < r1; r++) {
    std::copy(x + r * K, x + (r + 1) * K, xp + r * kp);
    std::fill(xp + r * kp + K, xp + (r + 1) * kp, 0.f);
  }
}

void gemm_kernels(ThreadPool& pool, float* out, const float* x, const void* w, WeightType wt,
                  int64_t M, int64_t N, int64_t K, CpuIsa isa, const BlockScales& scales = {}) {
  const int64_t C = isa == CpuIsa::Avx512 ? kChunkAvx512 : kChunkAvx2;
  const int64_t kp = ceil_div(K, C) * C;
  thread_local std::vector<float> packed;
  packed.resize(size_t(M * kp));
  float* xp = packed.data();  // the caller's buffer (workers have their own `packed`)
  if (M >= 64)
    pool.parallel_for(M, [&](int64_t r0, int64_t r1) { pack_rows(xp, x, r0, r1, K, kp); });
  else
    pack_rows(xp, x, 0, M, K, kp);
  GemmOperands g;
  g.xp = xp;
  g.w = w;
  g.out = out;
  g.M = M;
  g.K = K;
  g.kp = kp;
  g.ldo = N;
  g.wt = wt;
  g.blocks = scales;
  const bool widen_once = wt == WeightType::E4M3 && M >= widen_e4m3_rows(isa);
  g.block_rows = block_rows(N, K, widen_once ? 2 : weight_bytes(wt), pool.num_threads());
  const auto rows = isa == CpuIsa::Avx512 ? gemm_rows_avx512 : gemm_rows_avx2;
  const auto widen = isa == CpuIsa::Avx512 ? widen_e4m3_to_bf16_avx512 : widen_e4m3_to_bf16_avx2;
  const int64_t blocks = ceil_div(N, g.block_rows);
  pool.parallel_for(
      blocks,
      [&](int64_t b0, int64_t b1) {
        if (!widen_once) return rows(g, b0 * g.block_rows, std::min(N, b1 * g.block_rows));
        thread_local std::vector<uint16_t> wide;
        for (int64_t b = b0; b < b1; b++) {
          const int64_t n0 = b * g.block_rows, n = std::min(N, n0 + g.block_rows) - n0;
          wide.resize(size_t(n * K));
          widen(static_cast<const uint8_t*>(w) + n0 * K, wide.data(), n * K);
          GemmOperands gb = g;
          gb.w = wide.data();
          gb.wt = WeightType::BF16;
          gb.out = out + n0;
          rows(gb, 0, n);
        }
      },
      blocks);
}

// OpenBLAS sgemm per weight block, each block widened to f32 first (f32 weights are
// used in place). OpenBLAS runs one thread per call (CpuBackend sets it); the blocks
// spread over the pool.
void gemm_blas(ThreadPool& pool, float* out, const float* x, const void* w, WeightType wt,
               int64_t M, int64_t N, int64_t K) {
  const int64_t eb = weight_bytes(wt);
  const int64_t rows = block_rows(N, K, 4, pool.num_threads());
  const int64_t blocks = ceil_div(N, rows);
  pool.parallel_for(
      blocks,
      [&](int64_t b0, int64_t b1) {
        thread_local std::vector<float> wide;
        for (int64_t b = b0; b < b1; b++) {
          const int64_t n0 = b * rows, n = std::min(N, n0 + rows) - n0;
          const void* src = static_cast<const char*>(w) + n0 * K * eb;
          const float* wf = static_cast<const float*>(src);
          if (wt != WeightType::F32) {
            wide.resize(size_t(n * K));
            const DType d = wt == WeightType::BF16 ? DType::BF16
                            : wt == WeightType::F16  ? DType::F16
                                                     : DType::F8E4M3;
            convert_to_f32(src, d, wide.data(), size_t(n * K));
            wf = wide.data();
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(M), blasint(n), blasint(K),
                      1.f, x, blasint(K), wf, blasint(K), 0.f, out + n0, blasint(N));
        }
      },
      blocks);
}

}  // namespace

GemmPath gemm_path_for(int64_t M, DType w_dtype) {
  // The kernels at every M: single-threaded on the AVX-512 machine they ran 88–100
  // GFLOP/s at 256–1024 rows of the llama-100m shapes against OpenBLAS's 66–103 on the
  // widened blocks (bench/cpu_ops_bench), and only they keep a row's bits independent
  // of the other rows (OpenBLAS blocks by M).
  return GemmPath::Kernels;
}

void gemm_xwt(ThreadPool& pool, float* out, const float* x, const void* w, DType w_dtype,
              int64_t M, int64_t N, int64_t K, const GemmOptions& options) {
  if (M == 0 || N == 0) return;
  TANDEM_CHECK(K > 0, "gemm: empty reduction dim (M {}, N {})", M, N);
  const WeightType wt = weight_type(w_dtype);
  const GemmPath path = options.path.value_or(gemm_path_for(M, w_dtype));
  TANDEM_CHECK(options.isa <= cpu_max_isa(), "gemm: {} kernels asked of a cpu without them",
               cpu_isa_name(options.isa));
  if (path == GemmPath::Blas)
    gemm_blas(pool, out, x, w, wt, M, N, K);
  else
    gemm_kernels(pool, out, x, w, wt, M, N, K, options.isa);
}

void gemm_xwt_e4m3_blocks(ThreadPool& pool, float* out, const float* x, const uint8_t* w,
                          const float* scales, int64_t block_n, int64_t block_k, int64_t M,
                          int64_t N, int64_t K, CpuIsa isa) {
  if (M == 0 || N == 0) return;
  TANDEM_CHECK(K > 0 && block_n > 0 && block_k > 0 && block_k % kChunkAvx512 == 0,
               "gemm: block scales of {}x{} (block_k must be a multiple of {})", block_n, block_k,
               kChunkAvx512);
  TANDEM_CHECK(isa <= cpu_max_isa(), "gemm: {} kernels asked of a cpu without them", cpu_isa_name(isa));
  gemm_kernels(pool, out, x, w, WeightType::E4M3_BLOCKS, M, N, K, isa,
               BlockScales{scales, ceil_div(K, block_k), block_n, block_k});
}

}  // namespace tandem::cpu
