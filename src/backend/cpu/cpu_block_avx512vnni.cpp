// The integer block-type product for AVX-512 with VNNI (cpu_block_kernels.h). The 256-value
// blocks take 64 levels a step with vpmaddubsw and vpmaddwd against each pair's integer
// sub-scale: two uops on port 0, where vpdpbusd needs vpmulld's two more to apply the
// sub-scales (Q4_K, llama-100m's step at 16 rows, one thread: 62 ms with vpdpbusd + vpmulld).
// A 32-value block is one 256-bit vpdpbusd. The 8-bit levels of Q8_0 and the IQ4 types are
// stored signed, for the sign trick (vpmaddubsw's pair sums would overflow 16 bits).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/cpu_block_int8_tile.h"
#include "backend/cpu/cpu_block_panel_tile.h"
#include "backend/cpu/cpu_simd_avx512.h"

namespace tandem::cpu {
namespace {

struct Int8Vnni {
  using LaneScale = int16_t;
  using IAcc = __m512i;
  using FAcc = __m512;
  static constexpr int kLaneValues = 2, kStep = 64;
  // Levels up to 255 (offset 128) would overflow vpmaddubsw's 16-bit pair sums.
  template <BlockKind K>
  static constexpr bool kSigned = Block<K>::kOffset == 128;

  static IAcc izero() { return _mm512_setzero_si512(); }
  static FAcc fzero() { return _mm512_setzero_ps(); }
  template <bool S>
  static IAcc dot_scaled(IAcc acc, const uint8_t* u, const int8_t* q, const int16_t* lanes) {
    __m512i w = _mm512_loadu_si512(u), x = _mm512_loadu_si512(q);
    if constexpr (S) {  // |w| · (x with w's sign)
      x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
      w = _mm512_abs_epi8(w);
    }
    const __m512i pairs = _mm512_maddubs_epi16(w, x);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_loadu_si512(lanes)));
  }
  template <bool S>
  static __m256i dot32(const uint8_t* u, const int8_t* q) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u));
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    if constexpr (S) {
      x = _mm256_sign_epi8(x, w);
      w = _mm256_sign_epi8(w, w);
    }
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x);
  }
  static FAcc fma_i(IAcc isum, float s, FAcc acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(s), acc);
  }
  static float reduce(FAcc v) { return Avx512::reduce(v); }
};

// The panel kernels (cpu_block_panel_tile.h): a panel's 16 rows are one vector, a chunk one
// vpdpbusd per x row against 4 activation bytes broadcast (an embedded broadcast operand). The
// high nibbles are taken in place (x & 0xF0 = 16·u: no shift, and vpdpbusd never saturates);
// their S is S / 16. Offset-128 levels stay unsigned, their offset is the corr term.
struct PanelVnni {
  using VI = __m512i;
  using VF = __m512;
  static constexpr int kRows = 16, kTile = 4;
  static constexpr bool kHiShift = false, kSignTrick = false;
  static VI izero() { return _mm512_setzero_si512(); }
  static VF fzero() { return _mm512_setzero_ps(); }
  static VI load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static VI lo_nibbles(VI v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
  static VI hi_nibbles(VI v) { return _mm512_and_si512(v, _mm512_set1_epi8(char(0xF0))); }
  static VI dot(VI acc, VI w, const int8_t* x) {
    return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(load_i32(x)));
  }
  // Unused (kSignTrick is false); present for the template.
  static VI to_signed(VI v) { return v; }
  static VI abs8(VI v) { return v; }
  static VI dot_signed(VI acc, VI, VI w, const int8_t* x) { return dot(acc, w, x); }
  static VI shift4(VI v) { return _mm512_slli_epi32(v, 4); }
  static VI sub_bcast(VI v, int32_t c) { return _mm512_sub_epi32(v, _mm512_set1_epi32(c)); }
  static VF cvt(VI v) { return _mm512_cvtepi32_ps(v); }
  static VF loadf(const float* p) { return _mm512_loadu_ps(p); }
  static VF mulf(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static VI widen8(const int8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static VF set1f(float v) { return _mm512_set1_ps(v); }
  static VF fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, VF v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void block_int8_rows_avx512vnni(const BlockInt8Operands& g, int64_t n0, int64_t n1) {
  with_kind(g.kind, [&]<BlockKind K>() { int8_rows<Int8Vnni, K>(g, n0, n1); });
}

void block_panel_groups_avx512vnni(const BlockPanelOperands& g, int64_t g0, int64_t g1) {
  with_kind(g.kind, [&]<BlockKind K>() {
    if constexpr (kPanelShapes[int(K)].packed) panel_groups<PanelVnni, K>(g, g0, g1);
  });
}

}  // namespace tandem::cpu
