// The vector vocabulary of the AVX2 kernels (8 f32 lanes), one struct V that the kernel
// templates (cpu_gemm_tile.h, cpu_attention_tile.h) are written over; cpu_simd_avx512.h
// is its 16-lane twin with the same members. Include only from files compiled for the
// baseline, and everything is in an anonymous namespace, private to each file.
//
// Where an operation fixes a summation order (reduce) or an approximation (exp), the
// twins do the same arithmetic lane by lane, so a kernel written over V gives the same
// bits on both instruction sets.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/cpu_gemm_kernels.h"
#include "backend/cpu/cpu_vec_math.h"

namespace tandem::cpu {
namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  // The top halves of v's lanes (the bf16 of a value that is one exactly) at p.
  static void store_bf16(uint16_t* p, Reg v) {
    const __m256i h = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg exp(Reg x) { return exp8(x); }
  // Lanes whose index base + lane lies outside [lo, hi] replaced by `fill`.
  static Reg keep_lanes(Reg v, int64_t base, int64_t lo, int64_t hi, float fill) {
    const __m256i lane = _mm256_add_epi32(_mm256_set1_epi32(int32_t(base)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(lo)), lane),
                                        _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(int32_t(hi))));
    return _mm256_blendv_ps(v, _mm256_set1_ps(fill), _mm256_castsi256_ps(out));
  }
  // Lanes folded in halves: 8 -> 4 -> 2 -> 1.
  static float reduce(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(Reg v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[c * ld + j] = rows[j][c] for c, j < 8.
  static void transpose(const float* const* rows, float* out, int64_t ld) {
    __m256 r[8], t[8];
    for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(rows[j]);
    for (int j = 0; j < 8; j += 2) {
      t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
      t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
    // Within each 128-bit half: r[4i + c] = column (4 · half + c) of rows 4i..4i+3.
    for (int i = 0; i < 8; i += 4) {
      r[i] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t[i]), _mm256_castps_pd(t[i + 2])));
      r[i + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t[i]), _mm256_castps_pd(t[i + 2])));
      r[i + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t[i + 1]), _mm256_castps_pd(t[i + 3])));
      r[i + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t[i + 1]), _mm256_castps_pd(t[i + 3])));
    }
    for (int c = 0; c < 4; c++) {
      _mm256_storeu_ps(out + c * ld, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
      _mm256_storeu_ps(out + (4 + c) * ld, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
    }
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
    } else if constexpr (WT == WeightType::E4M3) {
      // An e4m3 byte's exponent and mantissa shifted left 7 are an f16's, with the f16's
      // exponent bias 8 larger: that f16 is the value / 256, subnormals included, and
      // F16C widens it exactly. The NaN codes (0x7f, 0xff) become an f16 NaN.
      const __m256i u = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
      const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi16(0x7f));
      __m256i h = _mm256_or_si256(_mm256_slli_epi16(mag, 7),
                                  _mm256_and_si256(_mm256_slli_epi16(u, 8), _mm256_set1_epi16(int16_t(0x8000))));
      h = _mm256_blendv_epi8(h, _mm256_set1_epi16(0x7e00), _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f)));
      const __m256 k = _mm256_set1_ps(256.f);
      a = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), k);
      b = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), k);
    } else {
      a = _mm256_loadu_ps(reinterpret_cast<const float*>(w));
      b = _mm256_loadu_ps(reinterpret_cast<const float*>(w) + 8);
    }
  }
};

}  // namespace
}  // namespace tandem::cpu
