// The exact block-type product (cpu_block_kernels.h, BlockExactOperands), written once over a
// vector type V (cpu_simd_avx2.h / cpu_simd_avx512.h) and instantiated by each ISA's file.
// Each group of 32 levels is decoded in registers to its f32 values, fl(fl(s·(u − o)) + b) as
// ggml rounds them (this file's users compile with -ffp-contract=off: the product and the sum
// stay two roundings), and enters one accumulator per output in the f32 GEMM tile's order:
// lanes-wide slices of k in order, one fma each, then V::reduce. K is a whole number of blocks,
// so no chunk is partial and the tile's zero padding never matters: the bits are those of
// gemm_xwt over the decoded weights in f32, whatever the number of rows or threads.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_block_decode.h"

namespace tandem::cpu {
namespace {

// Per-16 f32 scales of a block: s_h = fl(d·sc_h), b_h = fl(dm·mn_h).
template <BlockKind K>
struct BlockScales16 {
  static constexpr int kRuns = Block<K>::kElems / 16;
  float s[kRuns], b[kRuns];
  explicit BlockScales16(const uint8_t* blk) {
    BlockHead h;
    Block<K>::head(blk, h);
    for (int i = 0; i < kRuns; i++) {
      s[i] = h.d * float(h.sc[i]);
      b[i] = h.dm * float(h.mn[i]);
    }
  }
};

// 32 bytes as f32 vectors of V, in order.
template <class V>
inline void bytes_to_f32(__m256i u, typename V::Reg* w) {
  if constexpr (V::kLanes == 16) {
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(u)));
    w[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(u, 1)));
  } else {
    const __m128i lo = _mm256_castsi256_si128(u), hi = _mm256_extracti128_si256(u, 1);
    w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
  }
}

// The 32 values of group g as 32 / lanes vectors of V.
template <class V, BlockKind K>
inline void group_values(const uint8_t* blk, int g, const BlockScales16<K>& sc,
                         typename V::Reg* w) {
  constexpr int kRegs = 32 / int(V::kLanes), kPerRun = kRegs / 2;
  bytes_to_f32<V>(Block<K>::levels(blk, g), w);
  const typename V::Reg o = V::set1(float(Block<K>::kOffset));
  for (int r = 0; r < kRegs; r++) {
    const int run = 2 * g + r / kPerRun;
    w[r] = V::mul(V::set1(sc.s[run]), V::sub(w[r], o));
    if constexpr (Block<K>::kHasMin) w[r] = V::add(w[r], V::set1(sc.b[run]));
  }
}

// out[m0 + i, n] for i < MR.
template <class V, BlockKind K, int MR>
void exact_tile(const BlockExactOperands& g, int64_t m0, int64_t n) {
  constexpr int E = Block<K>::kElems, kRegs = 32 / int(V::kLanes);
  const uint8_t* row = g.w + n * (g.K / E) * Block<K>::kBytes;
  typename V::Reg acc[MR];
  for (int i = 0; i < MR; i++) acc[i] = V::zero();
  for (int64_t b = 0; b < g.K / E; b++) {
    const uint8_t* blk = row + b * Block<K>::kBytes;
    const BlockScales16<K> sc(blk);
    for (int gi = 0; gi < E / 32; gi++) {
      typename V::Reg w[kRegs];
      group_values<V, K>(blk, gi, sc, w);
      const int64_t k0 = b * E + gi * 32;
      for (int i = 0; i < MR; i++) {
        const float* x = g.x + (m0 + i) * g.K + k0;
        for (int r = 0; r < kRegs; r++) acc[i] = V::fma(V::load(x + r * V::kLanes), w[r], acc[i]);
      }
    }
  }
  for (int i = 0; i < MR; i++) g.out[(m0 + i) * g.ldo + n] = V::reduce(acc[i]);
}

// Every x row against weight rows [n0, n1): block by block (in L2), MR rows at a time.
template <class V, BlockKind K, int MR>
void exact_rows(const BlockExactOperands& g, int64_t n0, int64_t n1) {
  for (int64_t b0 = n0; b0 < n1; b0 += g.block_rows) {
    const int64_t b1 = b0 + g.block_rows < n1 ? b0 + g.block_rows : n1;
    int64_t m = 0;
    for (; m + MR <= g.M; m += MR)
      for (int64_t n = b0; n < b1; n++) exact_tile<V, K, MR>(g, m, n);
    for (; m < g.M; m++)
      for (int64_t n = b0; n < b1; n++) exact_tile<V, K, 1>(g, m, n);
  }
}

// dst [n1 − n0, K] = the f32 values of rows [n0, n1).
template <class V, BlockKind K>
void decode_rows(const uint8_t* w, int64_t K_, int64_t n0, int64_t n1, float* dst) {
  constexpr int E = Block<K>::kElems, kRegs = 32 / int(V::kLanes);
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t* row = w + n * (K_ / E) * Block<K>::kBytes;
    for (int64_t b = 0; b < K_ / E; b++) {
      const uint8_t* blk = row + b * Block<K>::kBytes;
      const BlockScales16<K> sc(blk);
      for (int gi = 0; gi < E / 32; gi++) {
        typename V::Reg v[kRegs];
        group_values<V, K>(blk, gi, sc, v);
        float* out = dst + (n - n0) * K_ + b * E + gi * 32;
        for (int r = 0; r < kRegs; r++) V::store(out + r * V::kLanes, v[r]);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::cpu
