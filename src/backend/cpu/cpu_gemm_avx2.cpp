// The GEMM kernels for AVX2 + FMA + F16C (the build's x86-64-v3 baseline): 8 f32 lanes,
// chunks of 16 k, two x rows per tile (16 ymm registers hold 4 x vectors, 8
// accumulators and a widened weight chunk).
#include "backend/cpu/cpu_gemm_tile.h"
#include "backend/cpu/cpu_simd_avx2.h"

namespace tandem::cpu {

static_assert(2 * Avx2::kLanes == kChunkAvx2);

void gemm_rows_avx2(const GemmOperands& g, int64_t n0, int64_t n1) {
  gemm_rows_for<Avx2, 2, 4, 1>(g, n0, n1);
}

}  // namespace tandem::cpu
