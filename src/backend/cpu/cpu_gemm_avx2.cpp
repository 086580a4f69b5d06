// The GEMM kernels for AVX2 + FMA + F16C (the build's x86-64-v3 baseline): 8 f32 lanes,
// chunks of 16 k, two x rows per tile (16 ymm registers hold 4 x vectors, 8
// accumulators and a widened weight chunk).
#include <immintrin.h>

#include "backend/cpu/cpu_gemm_tile.h"

namespace tandem::cpu {

namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // The 16 weights at w as two f32 vectors, in k order.
  template <WeightType WT>
  static void widen(const char* w, Reg& a, Reg& b) {
    if constexpr (WT == WeightType::BF16) {
      // A bf16 is the top half of its f32: zero-extend to 32 bits, shift into place.
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16));
      a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(lo), 16));
      b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(hi), 16));
    } else if constexpr (WT == WeightType::F16) {
      a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
      b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16)));
    } else {
      a = _mm256_loadu_ps(reinterpret_cast<const float*>(w));
      b = _mm256_loadu_ps(reinterpret_cast<const float*>(w) + 8);
    }
  }
};

static_assert(2 * Avx2::kLanes == kChunkAvx2);

}  // namespace

void gemm_rows_avx2(const GemmOperands& g, int64_t n0, int64_t n1) {
  gemm_rows_for<Avx2, 2, 4, 4>(g, n0, n1);
}

}  // namespace tandem::cpu
