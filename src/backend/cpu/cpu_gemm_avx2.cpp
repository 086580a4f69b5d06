// The GEMM kernels for AVX2 + FMA + F16C (the build's x86-64-v3 baseline): 8 f32 lanes,
// chunks of 16 k, two x rows per tile (16 ymm registers hold 4 x vectors, 8
// accumulators and a widened weight chunk). A lone x row takes two weight rows: one
// row's fma chain (two per 32 bytes of weights) is too slow for the stream at 8 lanes
// (the llama-100m step's 200 MB, one thread: 13.7-14.9 ms with one row, 9.9-10.1 with
// two, 10.9-11.2 with four).
#include "backend/cpu/cpu_gemm_tile.h"
#include "backend/cpu/cpu_simd_avx2.h"

namespace tandem::cpu {

static_assert(2 * Avx2::kLanes == kChunkAvx2);

void gemm_rows_avx2(const GemmOperands& g, int64_t n0, int64_t n1) {
  gemm_rows_for<Avx2, 2, 4, 2>(g, n0, n1);
}

void widen_e4m3_to_bf16_avx2(const uint8_t* src, uint16_t* dst, int64_t n) {
  widen_e4m3_to_bf16<Avx2>(src, dst, n);
}

}  // namespace tandem::cpu
