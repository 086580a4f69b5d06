// The panels' packing (cpu_block_panels.h) and the activations' quantization for the panel
// kernels, in AVX2 (every machine that runs either kernel has it). Included by
// cpu_block_avx2.cpp only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_block_decode.h"
#include "backend/cpu/cpu_block_panels.h"

namespace tandem::cpu {
namespace {

// Row r's levels of one weight block into the panel block's chunks (lane r).
template <BlockKind K>
void pack_levels(const uint8_t* blk, int r, uint8_t* pb) {
  using B = Block<K>;
  constexpr PanelShape P = kPanelShapes[int(K)];
  if constexpr (P.nibbles) {
    // The type's own bytes: pair p's chunk c is qs[p·unit + 4c, + 4).
    const uint8_t* qs = blk + (B::kBytes - P.elems / 2);  // qs ends each of these blocks
    for (int t = 0; t < P.elems / 8; t++) std::memcpy(pb + t * 64 + r * 4, qs + 4 * t, 4);
  } else {
    alignas(32) uint8_t u[P.elems];
    for (int grp = 0; grp < P.elems / 32; grp++)
      _mm256_store_si256(reinterpret_cast<__m256i*>(u + 32 * grp), B::levels(blk, grp));
    for (int t = 0; t < P.elems / 4; t++) std::memcpy(pb + t * 64 + r * 4, u + 4 * t, 4);
  }
}

// Row r's scales of one weight block into the panel block (cpu_block_panels.h).
template <BlockKind K>
void pack_scales(const BlockHead& h, int r, uint8_t* pb) {
  constexpr PanelShape P = kPanelShapes[int(K)];
  constexpr int kRunsPerUnit = P.unit / 16;  // a unit's runs of 16 share sc and mn
  if constexpr (P.scales)
    for (int j = 0; j < P.units(); j++) {
      pb[P.level_bytes() + j * kPanelRows + r] = uint8_t(int8_t(h.sc[j * kRunsPerUnit]));
      if constexpr (P.min)
        pb[P.level_bytes() + P.sc_bytes() + j * kPanelRows + r] =
            uint8_t(int8_t(h.mn[j * kRunsPerUnit]));
    }
  float* d = reinterpret_cast<float*>(pb + P.d_offset());
  d[r] = h.d;
  if constexpr (P.min) d[kPanelRows + r] = h.dm;
}

// Panels [g0, g1) of w (rows of K values) into dst.
template <BlockKind K>
void pack_panels(const uint8_t* w, int64_t Kdim, int64_t g0, int64_t g1, uint8_t* dst) {
  using B = Block<K>;
  constexpr PanelShape P = kPanelShapes[int(K)];
  const int64_t blocks = Kdim / P.elems, row_bytes = blocks * B::kBytes;
  for (int64_t p = g0; p < g1; p++)
    for (int64_t b = 0; b < blocks; b++) {
      uint8_t* pb = dst + ((p - g0) * blocks + b) * P.block_bytes();
      for (int r = 0; r < int(kPanelRows); r++) {
        const uint8_t* blk = w + (p * kPanelRows + r) * row_bytes + b * B::kBytes;
        BlockHead h;
        B::head(blk, h);
        pack_scales<K>(h, r, pb);
        pack_levels<K>(blk, r, pb);
      }
    }
}

// The low four bytes of each i32 of a, b, c, d (each in [−127, 127]) as 32 bytes in order.
inline __m256i pack_i32x4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd),
                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// round(t) half away from zero (std::round), exactly, for |t| < 2^22.
inline __m256 round_half_away(__m256 t) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(t, r));  // exact
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(t, sign), _mm256_set1_ps(1.f));
  return _mm256_add_ps(r, _mm256_and_ps(up, one));
}

// One row quantized per block of ab values, bit for bit as quantize_block_acts: d =
// max|x| / 127, q = clamp(round(x · (1 / d)), ±127) (0 where d = 0).
inline void quantize_acts_row(const float* x, int64_t K, int ab, int8_t* q, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.f), lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  for (int64_t b = 0; b < K / ab; b++) {
    const float* v = x + b * ab;
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < ab; i += 8)
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(v + i)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float db = _mm_cvtss_f32(m4) / 127.f, id = db > 0.f ? 1.f / db : 0.f;
    d[b] = db;
    const __m256 vid = _mm256_set1_ps(id);
    for (int i = 0; i < ab; i += 32) {
      __m256i w[4];
      for (int j = 0; j < 4; j++) {
        const __m256 t = round_half_away(_mm256_mul_ps(_mm256_loadu_ps(v + i + 8 * j), vid));
        w[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(t, lo), hi));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * ab + i),
                          pack_i32x4(w[0], w[1], w[2], w[3]));
    }
  }
}

// Rows [m0, m1) of x for the panel kernels of K (cpu_block_panels.h, PanelActs).
template <BlockKind K>
void panel_acts(bool signed_levels, const float* x, int64_t Kdim, int64_t m0, int64_t m1, int8_t* q,
                float* d, int32_t* corr, float* bsum) {
  constexpr PanelShape P = kPanelShapes[int(K)];
  const int64_t units = Kdim / P.unit;
  for (int64_t m = m0; m < m1; m++) {
    int8_t* qm = q + m * Kdim;
    quantize_acts_row(x + m * Kdim, Kdim, P.elems, qm, d + m * (Kdim / P.elems));
    for (int64_t u = 0; u < units; u++) {
      int32_t s = 0;
      for (int i = 0; i < P.unit; i++) s += qm[u * P.unit + i];
      int32_t o = P.offset;
      if (P.nibbles && u % P.units() % 2 == 1) o *= 16;  // a high-nibble unit: 16·u · q
      if (signed_levels && P.offset == 128) o = 0;
      corr[m * units + u] = o * s;
      bsum[m * units + u] = float(s);
    }
  }
}

}  // namespace
}  // namespace tandem::cpu
