// The GEMM kernels for AVX-512 (F, BW, VL): 16 f32 lanes, chunks of 32 k. Compiled with
// -mavx512f -mavx512bw -mavx512vl (CMakeLists.txt) and called only after cpu_isa() says
// the machine has them. Includes nothing inline from outside its own files.
// GCC 12's AVX-512 intrinsics start from deliberately undefined vectors, which
// -Wuninitialized reports wherever they inline (a false positive: GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "backend/cpu/cpu_gemm_tile.h"

namespace tandem::cpu {

namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  // The 16 lanes folded in halves; the last eight as the AVX2 kernels fold theirs.
  static float reduce(Reg v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // The 32 weights at w as two f32 vectors, in k order.
  template <WeightType WT>
  static void widen(const char* w, Reg& a, Reg& b) {
    if constexpr (WT == WeightType::BF16) {
      // A bf16 is the top half of its f32: zero-extend to 32 bits, shift into place.
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32));
      a = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(lo), 16));
      b = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
    } else if constexpr (WT == WeightType::F16) {
      a = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
      b = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32)));
    } else {
      a = _mm512_loadu_ps(reinterpret_cast<const float*>(w));
      b = _mm512_loadu_ps(reinterpret_cast<const float*>(w) + 16);
    }
  }
};

static_assert(2 * Avx512::kLanes == kChunkAvx512);

}  // namespace

void gemm_rows_avx512(const GemmOperands& g, int64_t n0, int64_t n1) {
  gemm_rows_for<Avx512, 4, 4, 4>(g, n0, n1);
}

}  // namespace tandem::cpu
