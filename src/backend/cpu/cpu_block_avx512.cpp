// The exact block-type product for AVX-512 (F, BW, VL; cpu_block_kernels.h): 16 f32 lanes, a
// group of 32 decoded values is one chunk of the f32 GEMM tile, four x rows a tile.
// GCC 12's AVX-512 intrinsics start from deliberately undefined vectors, which
// -Wuninitialized reports wherever they inline (a false positive: GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/cpu_block_exact_tile.h"
#include "backend/cpu/cpu_simd_avx512.h"

namespace tandem::cpu {

void block_exact_rows_avx512(const BlockExactOperands& g, int64_t n0, int64_t n1) {
  with_kind(g.kind, [&]<BlockKind K>() { exact_rows<Avx512, K, 4>(g, n0, n1); });
}

void block_decode_rows_avx512(BlockKind kind, const uint8_t* w, int64_t K, int64_t n0, int64_t n1,
                              float* dst) {
  with_kind(kind, [&]<BlockKind B>() { decode_rows<Avx512, B>(w, K, n0, n1, dst); });
}

}  // namespace tandem::cpu
