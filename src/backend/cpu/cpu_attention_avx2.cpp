// The attention tile kernel for AVX2 (the baseline): scores for three queries against two
// tiles at a time (12 accumulators of 8 keys), value sums for two queries (four head-dim
// vectors each), within the 16 ymm registers.
#include "backend/cpu/cpu_attention_tile.h"
#include "backend/cpu/cpu_simd_avx2.h"

namespace tandem::cpu {

void attend_tiles_avx2(const AttnQueries& a, const AttnTile* tiles, int64_t num_tiles, float* scratch) {
  attend_tiles<Avx2, 3, 2, 2>(a, tiles, num_tiles, scratch);
}

void attend_finish_avx2(const AttnQueries& a) {
  attend_finish<Avx2>(a);
}

}  // namespace tandem::cpu
