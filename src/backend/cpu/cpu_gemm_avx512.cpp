// The GEMM kernels for AVX-512 (F, BW, VL): 16 f32 lanes, chunks of 32 k. Compiled with
// -mavx512f -mavx512bw -mavx512vl (CMakeLists.txt) and called only after cpu_isa() says
// the machine has them. Includes nothing inline from outside its own files. A lone x row
// takes one weight row per tile: one sequential stream (cpu_gemm_tile.h; with two rows
// the 200 MB step ran 13.1-13.7 ms against 8.1-12.8 for one, one thread, same run).
// GCC 12's AVX-512 intrinsics start from deliberately undefined vectors, which
// -Wuninitialized reports wherever they inline (a false positive: GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/cpu_gemm_tile.h"
#include "backend/cpu/cpu_simd_avx512.h"

namespace tandem::cpu {

static_assert(2 * Avx512::kLanes == kChunkAvx512);

void gemm_rows_avx512(const GemmOperands& g, int64_t n0, int64_t n1) {
  gemm_rows_for<Avx512, 4, 4, 1>(g, n0, n1);
}

void widen_e4m3_to_bf16_avx512(const uint8_t* src, uint16_t* dst, int64_t n) {
  widen_e4m3_to_bf16<Avx512>(src, dst, n);
}

}  // namespace tandem::cpu
