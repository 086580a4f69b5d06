// The integer block-type product for AVX-512 with VNNI (cpu_block_kernels.h): vpdpbusd sums
// four u·q per 32-bit lane with no intermediate saturation, so every type keeps its unsigned
// levels and offset; 64 levels a step for the 256-value blocks (each lane's integer sub-scale
// applied with vpmulld), a 256-bit vpdpbusd per 32-value block.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/cpu_block_int8_tile.h"
#include "backend/cpu/cpu_simd_avx512.h"

namespace tandem::cpu {
namespace {

struct Int8Vnni {
  using LaneScale = int32_t;
  using IAcc = __m512i;
  using FAcc = __m512;
  static constexpr int kLaneValues = 4, kStep = 64;
  template <BlockKind K>
  static constexpr bool kSigned = false;

  static IAcc izero() { return _mm512_setzero_si512(); }
  static FAcc fzero() { return _mm512_setzero_ps(); }
  template <bool S>
  static IAcc dot_scaled(IAcc acc, const uint8_t* u, const int8_t* q, const int32_t* lanes) {
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(u),
                                          _mm512_loadu_si512(q));
    return _mm512_add_epi32(acc, _mm512_mullo_epi32(p, _mm512_loadu_si512(lanes)));
  }
  template <bool S>
  static __m256i dot32(const uint8_t* u, const int8_t* q) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
  }
  static FAcc fma_i(IAcc isum, float s, FAcc acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(s), acc);
  }
  static float reduce(FAcc v) { return Avx512::reduce(v); }
};

}  // namespace

void block_int8_rows_avx512vnni(const BlockInt8Operands& g, int64_t n0, int64_t n1) {
  with_kind(g.kind, [&]<BlockKind K>() { int8_rows<Int8Vnni, K>(g, n0, n1); });
}

}  // namespace tandem::cpu
