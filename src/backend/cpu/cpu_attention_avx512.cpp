// The attention tile kernel for AVX-512 (F, BW, VL): scores for four queries against four
// tiles at a time (16 accumulators of 16 keys), value sums for four queries (four
// head-dim vectors each: 16 accumulators). Compiled with the AVX-512 flags, called only after a cpuid check.
// GCC 12's AVX-512 intrinsics trip a false -Wuninitialized (bug 105593; cpu_gemm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/cpu_attention_tile.h"
#include "backend/cpu/cpu_simd_avx512.h"

namespace tandem::cpu {

void attend_tiles_avx512(const AttnQueries& a, const AttnTile* tiles, int64_t num_tiles,
                         float* scratch) {
  attend_tiles<Avx512, 4, 4, 4>(a, tiles, num_tiles, scratch);
}

void attend_finish_avx512(const AttnQueries& a) {
  attend_finish<Avx512>(a);
}

}  // namespace tandem::cpu
