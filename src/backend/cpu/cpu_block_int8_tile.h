// The integer block-type product (cpu_block_kernels.h, BlockInt8Operands), written once over
// an instruction set I (Int8Avx2 in cpu_block_avx2.cpp, Int8Vnni in cpu_block_avx512vnni.cpp).
//
// A weight row is decoded once into a small row of its own (Int8Row: levels, integer lane
// scales, block scales and the per-16 coefficients of the offset and min terms), which then
// meets every x row of the step: one pass over the weights whatever the number of rows. For a
// block of E values against an activation block of the same span (E = act_block):
//   y += d_w · d_x · Σ_lanes (Σ u·q) · sc      (integer inside a block, one f32 fma per block)
//   y += Σ_16 coef · xs,  coef = dm·mn − o·d·sc,  xs = d_x · Σ_16 q   (the offset and the min)
// Every output is one thread's fixed sequence of operations, so its bits depend on neither the
// number of rows nor the threads.
//
// I supplies the integer steps: kStep bytes of levels against kStep activations scaled per
// lane (256-value blocks), a 32-value block's partial sums (32-value blocks), and whether a
// type's levels are stored signed for it (the sign trick of an instruction that saturates:
// vpmaddubsw sums two u·q in 16 bits, which u up to 255 would overflow).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_block_decode.h"

namespace tandem::cpu {
namespace {

// One weight row decoded for the integer dot products.
template <class I>
struct Int8Row {
  std::vector<uint8_t> u;                    // [K] levels (signed where I stores them so)
  std::vector<typename I::LaneScale> lanes;  // [K / I::kLaneValues] sc of each lane (E = 256)
  std::vector<float> d;                      // [K / E] d of each block
  std::vector<float> coef;                   // [K / 16] dm·mn − o·d·sc
  void resize(int64_t K, int E) {
    u.resize(size_t(K));
    lanes.resize(size_t(K / I::kLaneValues));
    d.resize(size_t(K / E));
    coef.resize(size_t(K / 16));
  }
};

// Whether the offset and min terms exist for K under I (a signed store has no offset).
template <class I, BlockKind K>
constexpr bool has_coef() {
  return Block<K>::kHasMin || (Block<K>::kOffset != 0 && !I::template kSigned<K>);
}

template <class I, BlockKind K>
void decode_row_int8(const uint8_t* row, int64_t Kdim, Int8Row<I>& r) {
  using B = Block<K>;
  constexpr int E = B::kElems, kRuns = E / 16, kLanesPerRun = 16 / I::kLaneValues;
  constexpr bool kSigned = I::template kSigned<K>;
  constexpr float o = kSigned ? 0.f : float(B::kOffset);
  r.resize(Kdim, E);
  for (int64_t b = 0; b < Kdim / E; b++) {
    const uint8_t* blk = row + b * B::kBytes;
    BlockHead h;
    B::head(blk, h);
    r.d[size_t(b)] = h.d;
    for (int s = 0; s < kRuns; s++) {
      const float min = B::kHasMin ? h.dm * float(h.mn[s]) : 0.f;  // no mn without a min
      r.coef[size_t(b * kRuns + s)] = min - o * h.d * float(h.sc[s]);
      if constexpr (E == 256)
        for (int l = 0; l < kLanesPerRun; l++)
          r.lanes[size_t((b * kRuns + s) * kLanesPerRun + l)] = typename I::LaneScale(h.sc[s]);
    }
    for (int g = 0; g < E / 32; g++) {
      __m256i v = B::levels(blk, g);
      if constexpr (kSigned) v = _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.u.data() + b * E + 32 * g), v);
    }
  }
}

// Σ coef · xs over the row's runs of 16.
inline float coef_dot(const float* coef, const float* xs, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(coef + i), _mm256_loadu_ps(xs + i), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float t = _mm_cvtss_f32(s);
  for (; i < n; i++) t += coef[i] * xs[i];
  return t;
}

inline float reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The activation rows one dot_int8 call takes: R rows of (q [K], d [K / act_block], xs [K / 16]).
template <int R>
struct ActRows {
  const int8_t* q[R];
  const float* d[R];
  const float* xs[R];
};

// R outputs: the decoded weight row against R activation rows at once, so the row's levels
// and lane scales are loaded once for all R and R independent chains keep the core busy.
// Each output's operations and their order are those of R = 1.
template <class I, BlockKind K, int R>
void dot_int8(const Int8Row<I>& r, const ActRows<R>& x, int64_t Kdim, float* out, int64_t ldo) {
  constexpr int E = Block<K>::kElems;
  constexpr bool kSigned = I::template kSigned<K>;
  float y[R];
  if constexpr (E == 256) {
    typename I::FAcc acc[R];
    for (int j = 0; j < R; j++) acc[j] = I::fzero();
    for (int64_t b = 0; b < Kdim / 256; b++) {
      typename I::IAcc isum[R];
      for (int j = 0; j < R; j++) isum[j] = I::izero();
      for (int c = 0; c < 256; c += I::kStep) {
        const int64_t k = b * 256 + c;
        for (int j = 0; j < R; j++)
          isum[j] = I::template dot_scaled<kSigned>(isum[j], r.u.data() + k, x.q[j] + k,
                                                    r.lanes.data() + k / I::kLaneValues);
      }
      for (int j = 0; j < R; j++) acc[j] = I::fma_i(isum[j], r.d[size_t(b)] * x.d[j][b], acc[j]);
    }
    for (int j = 0; j < R; j++) y[j] = I::reduce(acc[j]);
  } else {
    __m256 acc[R];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < Kdim / 32; b++)
      for (int j = 0; j < R; j++) {
        const __m256i p = I::template dot32<kSigned>(r.u.data() + b * 32, x.q[j] + b * 32);
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(r.d[size_t(b)] * x.d[j][b]),
                                 acc[j]);
      }
    for (int j = 0; j < R; j++) y[j] = reduce8(acc[j]);
  }
  for (int j = 0; j < R; j++) {
    if constexpr (has_coef<I, K>()) y[j] += coef_dot(r.coef.data(), x.xs[j], Kdim / 16);
    out[j * ldo] = y[j];
  }
}

// Rows [m, m + R) of the step's activations.
template <int R>
ActRows<R> act_rows(const BlockInt8Operands& g, int64_t m) {
  ActRows<R> a;
  const int64_t ab = g.acts.act_block;
  for (int j = 0; j < R; j++) {
    a.q[j] = g.acts.q + (m + j) * g.K;
    a.d[j] = g.acts.d + (m + j) * (g.K / ab);
    a.xs[j] = g.acts.xs + (m + j) * (g.K / 16);
  }
  return a;
}

// Weight rows [n0, n1) against every x row, four x rows at a time.
template <class I, BlockKind K>
void int8_rows(const BlockInt8Operands& g, int64_t n0, int64_t n1) {
  thread_local Int8Row<I> row;
  const int64_t row_bytes = g.K / Block<K>::kElems * Block<K>::kBytes;
  for (int64_t n = n0; n < n1; n++) {
    decode_row_int8<I, K>(g.w + n * row_bytes, g.K, row);
    int64_t m = 0;
    for (; m + 4 <= g.M; m += 4)
      dot_int8<I, K, 4>(row, act_rows<4>(g, m), g.K, g.out + m * g.ldo + n, g.ldo);
    for (; m < g.M; m++)
      dot_int8<I, K, 1>(row, act_rows<1>(g, m), g.K, g.out + m * g.ldo + n, g.ldo);
  }
}

}  // namespace
}  // namespace tandem::cpu
