// The block-type kernels for AVX2 (cpu_block_kernels.h): the exact product on 8 f32 lanes,
// four x rows a tile (16 ymm registers hold four accumulators and a decoded group), and the
// integer product with vpmaddubsw (two u·q summed in 16 bits) and vpmaddwd (the lane scales),
// the 8-bit levels of Q8_0 and the IQ4 types stored signed for the sign trick.
#include "backend/cpu/cpu_block_exact_tile.h"
#include "backend/cpu/cpu_block_int8_tile.h"
#include "backend/cpu/cpu_simd_avx2.h"

namespace tandem::cpu {
namespace {

struct Int8Avx2 {
  using LaneScale = int16_t;
  using IAcc = __m256i;
  using FAcc = __m256;
  static constexpr int kLaneValues = 2, kStep = 32;
  // Levels up to 255 (offset 128) would overflow vpmaddubsw's 16-bit pair sums.
  template <BlockKind K>
  static constexpr bool kSigned = Block<K>::kOffset == 128;

  static IAcc izero() { return _mm256_setzero_si256(); }
  static FAcc fzero() { return _mm256_setzero_ps(); }
  // Sixteen sums of two u·q each.
  template <bool S>
  static __m256i pairs(const uint8_t* u, const int8_t* q) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u));
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    if constexpr (S) return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_maddubs_epi16(w, x);
  }
  template <bool S>
  static IAcc dot_scaled(IAcc acc, const uint8_t* u, const int8_t* q, const int16_t* lanes) {
    const __m256i sc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs<S>(u, q), sc));
  }
  template <bool S>
  static __m256i dot32(const uint8_t* u, const int8_t* q) {
    return _mm256_madd_epi16(pairs<S>(u, q), _mm256_set1_epi16(1));
  }
  static FAcc fma_i(IAcc isum, float s, FAcc acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(s), acc);
  }
  static float reduce(FAcc v) { return reduce8(v); }
};

}  // namespace

void block_exact_rows_avx2(const BlockExactOperands& g, int64_t n0, int64_t n1) {
  with_kind(g.kind, [&]<BlockKind K>() { exact_rows<Avx2, K, 4>(g, n0, n1); });
}

void block_decode_rows_avx2(BlockKind kind, const uint8_t* w, int64_t K, int64_t n0, int64_t n1,
                            float* dst) {
  with_kind(kind, [&]<BlockKind B>() { decode_rows<Avx2, B>(w, K, n0, n1, dst); });
}

void block_int8_rows_avx2(const BlockInt8Operands& g, int64_t n0, int64_t n1) {
  with_kind(g.kind, [&]<BlockKind K>() { int8_rows<Int8Avx2, K>(g, n0, n1); });
}

}  // namespace tandem::cpu
