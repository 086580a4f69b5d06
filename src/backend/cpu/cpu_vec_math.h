// Vectorized f32 math for the CPU ops, on AVX2 (the build's baseline, so any file may
// include this). exp8 is the Cephes single-precision exp (a degree-6 polynomial after
// range reduction by ln 2, within 2 ulp of expf over the clamped range), eight lanes at
// a time; the scalar formulas stay beside their ops as the reference they are tested
// against.
#pragma once

#include <immintrin.h>

namespace tandem::cpu {

// e^x per lane; x is clamped to [-87.3, 88.4] (e^x is then within f32's normal range).
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.3762626647949f));
  // x = n·ln2 + r, |r| <= ln2 / 2; ln2 in two parts so n·ln2 is exact enough.
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // · 2^n: n + 127 into the exponent field (n is in [-126, 127] after the clamp).
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// x · sigmoid(x) = x / (1 + e^-x) per lane (torch's silu).
inline __m256 silu8(__m256 x) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.f), e));
}

// torch's gelu(approximate="tanh"), 0.5·x·(1 + tanh(u)) with u = √(2/π)·(x + 0.044715·x³),
// computed as x · sigmoid(2u) = x / (1 + e^(-2u)), the same function.
inline __m256 gelu_tanh8(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                 _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
  const __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.f), u));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.f), e));
}

}  // namespace tandem::cpu
