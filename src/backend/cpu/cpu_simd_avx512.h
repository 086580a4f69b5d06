// The vector vocabulary of the AVX-512 kernels (F, BW, VL: 16 f32 lanes), the twin of
// cpu_simd_avx2.h with the same members and, lane by lane, the same arithmetic (exp is
// exp8's instruction sequence; reduce folds 16 lanes to 8 and then as Avx2 does). Include
// only from *_avx512.cpp files (compiled with the AVX-512 flags, called after a cpuid
// check); like its twin it lives in an anonymous namespace and includes no inline code
// from outside, so nothing compiled for AVX-512 can be linked into the baseline path.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/cpu_gemm_kernels.h"

namespace tandem::cpu {
namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  // The top halves of v's lanes (the bf16 of a value that is one exactly) at p.
  static void store_bf16(uint16_t* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
  }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  // exp8 of cpu_vec_math.h on 16 lanes (the same Cephes steps in the same order).
  static Reg exp(Reg x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.3762626647949f));
    const Reg n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    Reg r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    Reg p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  }
  // Lanes whose index base + lane lies outside [lo, hi] replaced by `fill`.
  static Reg keep_lanes(Reg v, int64_t base, int64_t lo, int64_t hi, float fill) {
    const __m512i lane = _mm512_add_epi32(
        _mm512_set1_epi32(int32_t(base)),
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __mmask16 out = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(int32_t(lo))) |
                          _mm512_cmpgt_epi32_mask(lane, _mm512_set1_epi32(int32_t(hi)));
    return _mm512_mask_blend_ps(out, v, _mm512_set1_ps(fill));
  }
  static __m256 high_half(Reg v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  }
  // The 16 lanes folded in halves; the last eight as the AVX2 kernels fold theirs.
  static float reduce(Reg v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), high_half(v));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(Reg v) {
    const __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(v), high_half(v));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[c * ld + j] = rows[j][c] for c, j < 16.
  static void transpose(const float* const* rows, float* out, int64_t ld) {
    Reg r[16], t[16];
    for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(rows[j]);
    for (int j = 0; j < 16; j += 2) {
      t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
      t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
    }
    // Within each 128-bit quarter q: r[4i + c] = column (4q + c) of rows 4i..4i+3.
    for (int i = 0; i < 16; i += 4) {
      const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
      const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
      r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    // Column 4q + c gathers quarter q of r[c], r[4 + c], r[8 + c], r[12 + c].
    for (int c = 0; c < 4; c++) {
      const Reg p0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44), p1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
      const Reg p2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44), p3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
      _mm512_storeu_ps(out + c * ld, _mm512_shuffle_f32x4(p0, p2, 0x88));
      _mm512_storeu_ps(out + (4 + c) * ld, _mm512_shuffle_f32x4(p0, p2, 0xDD));
      _mm512_storeu_ps(out + (8 + c) * ld, _mm512_shuffle_f32x4(p1, p3, 0x88));
      _mm512_storeu_ps(out + (12 + c) * ld, _mm512_shuffle_f32x4(p1, p3, 0xDD));
    }
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
    } else if constexpr (WT == WeightType::E4M3) {
      // As in Avx2::widen: the e4m3 bits shifted into an f16 are the value / 256.
      const __m512i u = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
      const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi16(0x7f));
      __m512i h = _mm512_or_si512(_mm512_slli_epi16(mag, 7),
                                  _mm512_and_si512(_mm512_slli_epi16(u, 8), _mm512_set1_epi16(int16_t(0x8000))));
      h = _mm512_mask_mov_epi16(h, _mm512_cmpeq_epi16_mask(mag, _mm512_set1_epi16(0x7f)),
                                _mm512_set1_epi16(0x7e00));
      const __m512 k = _mm512_set1_ps(256.f);
      a = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), k);
      b = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), k);
    } else if constexpr (WT == WeightType::F16) {
      a = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
      b = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32)));
    } else {
      a = _mm512_loadu_ps(reinterpret_cast<const float*>(w));
      b = _mm512_loadu_ps(reinterpret_cast<const float*>(w) + 16);
    }
  }
};

}  // namespace
}  // namespace tandem::cpu
