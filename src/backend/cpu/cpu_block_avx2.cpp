// The block-type kernels for AVX2 (cpu_block_kernels.h): the exact product on 8 f32 lanes,
// four x rows a tile (16 ymm registers hold four accumulators and a decoded group), and the
// integer product with vpmaddubsw (two u·q summed in 16 bits) and vpmaddwd (the lane scales),
// the 8-bit levels of Q8_0 and the IQ4 types stored signed for the sign trick.
#include "backend/cpu/cpu_block_exact_tile.h"
#include "backend/cpu/cpu_block_int8_tile.h"
#include "backend/cpu/cpu_block_panel_pack.h"
#include "backend/cpu/cpu_block_panel_tile.h"
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

// The panel kernels (cpu_block_panel_tile.h) on 8 lanes: a panel is two vectors of 8 rows.
// vpmaddubsw sums two u·q in 16 bits, so the high nibbles are shifted down (16·u would
// saturate it) and their sums multiplied by 16 after, and offset-128 levels are taken signed
// (u ^ 0x80 = q) for the sign trick, with no corr.
struct PanelAvx2 {
  using VI = __m256i;
  using VF = __m256;
  static constexpr int kRows = 8, kTile = 2;
  static constexpr bool kHiShift = true, kSignTrick = true;
  static VI izero() { return _mm256_setzero_si256(); }
  static VF fzero() { return _mm256_setzero_ps(); }
  static VI load(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static VI lo_nibbles(VI v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
  static VI hi_nibbles(VI v) {
    return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
  }
  static VI sum4(VI acc, VI pairs) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static VI dot(VI acc, VI w, const int8_t* x) {
    return sum4(acc, _mm256_maddubs_epi16(w, _mm256_set1_epi32(load_i32(x))));
  }
  static VI to_signed(VI v) { return _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80))); }
  static VI abs8(VI v) { return _mm256_sign_epi8(v, v); }
  static VI dot_signed(VI acc, VI aw, VI w, const int8_t* x) {
    return sum4(acc, _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(load_i32(x)), w)));
  }
  static VI shift4(VI v) { return _mm256_slli_epi32(v, 4); }
  static VI sub_bcast(VI v, int32_t c) { return _mm256_sub_epi32(v, _mm256_set1_epi32(c)); }
  static VF cvt(VI v) { return _mm256_cvtepi32_ps(v); }
  static VF loadf(const float* p) { return _mm256_loadu_ps(p); }
  static VF mulf(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static VI widen8(const int8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static VF set1f(float v) { return _mm256_set1_ps(v); }
  static VF fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, VF v) { _mm256_storeu_ps(p, v); }
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

void block_panel_groups_avx2(const BlockPanelOperands& g, int64_t g0, int64_t g1) {
  with_kind(g.kind, [&]<BlockKind K>() {
    if constexpr (kPanelShapes[int(K)].packed) panel_groups<PanelAvx2, K>(g, g0, g1);
  });
}

void block_pack_panels_avx2(BlockKind kind, const uint8_t* w, int64_t K, int64_t g0, int64_t g1,
                            uint8_t* dst) {
  with_kind(kind, [&]<BlockKind B>() {
    if constexpr (kPanelShapes[int(B)].packed) pack_panels<B>(w, K, g0, g1, dst);
  });
}

void block_panel_acts_avx2(BlockKind kind, bool signed_levels, const float* x, int64_t K,
                           int64_t m0, int64_t m1, int8_t* q, float* d, int32_t* corr,
                           float* bsum) {
  with_kind(kind, [&]<BlockKind B>() {
    if constexpr (kPanelShapes[int(B)].packed)
      panel_acts<B>(signed_levels, x, K, m0, m1, q, d, corr, bsum);
  });
}

}  // namespace tandem::cpu
