// The attention tile kernel (cpu_attention_kernels.h), written once over a vector type V
// (cpu_simd_avx2.h, cpu_simd_avx512.h) and instantiated by each ISA's file; anonymous
// like cpu_gemm_tile.h, so each file keeps its own copy.
//
// Per query and tile, in this order (the arithmetic every caller gets):
//   s_j   = fma chain over d = 0 .. Dh-1 of q[d] · k_j[d], from 0; then · scale; then
//           softcapped (std::tanh);
//   m'    = max(m, max of s_j over the query's keys j of the tile);
//   alpha = 1 when m' = m, else exp(m - m');
//   p_j   = exp(s_j - m') for its keys, 0 for the others;
//   l     = l · alpha + (p_0 .. p_15 summed in halves: j + 8, then + 4, + 2, + 1);
//   out   = out · alpha (skipped when alpha = 1), then out = fma(p_j, v_j, out) for its
//           keys j in increasing order.
// Scores take the keys as lanes (the tile's K transposed once for all queries), the value
// sums take the head dim as lanes; exp is V::exp, the same steps on both ISAs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/cpu_attention_kernels.h"

namespace tandem::cpu {
namespace {

template <class V>
constexpr int kKeyVecs = int(kAttnTileKeys / V::kLanes);

// kt[d * kAttnTileKeys + j] = t.k[j][d]: the tile's keys as columns.
template <class V>
void transpose_keys(const AttnTile& t, int64_t Dh, float* kt) {
  constexpr int64_t L = V::kLanes;
  int64_t d = 0;
  for (; d + L <= Dh; d += L)
    for (int64_t h = 0; h < kAttnTileKeys; h += L) {
      const float* rows[L];
      for (int64_t j = 0; j < L; j++) rows[j] = t.k[h + j] + d;
      V::transpose(rows, kt + d * kAttnTileKeys + h, kAttnTileKeys);
    }
  for (; d < Dh; d++)
    for (int64_t j = 0; j < kAttnTileKeys; j++) kt[d * kAttnTileKeys + j] = t.k[j][d];
}

// Unscaled scores of queries i0 .. i0 + QG - 1 against tiles 0 .. NT - 1 of kt (each
// [Dh, kAttnTileKeys]), stored to s[i][t * kAttnTileKeys + j]: QG · NT independent fma
// chains over d.
template <class V, int QG, int NT>
void scores(const AttnQueries& a, int64_t i0, const float* kt, float* s, int64_t ld) {
  constexpr int NV = kKeyVecs<V>;
  const int64_t tile_floats = a.Dh * kAttnTileKeys;
  typename V::Reg acc[QG][NT][NV];
  const float* q[QG];
  for (int i = 0; i < QG; i++) {
    q[i] = a.q[i0 + i];
    for (int t = 0; t < NT; t++)
      for (int v = 0; v < NV; v++) acc[i][t][v] = V::zero();
  }
  for (int64_t d = 0; d < a.Dh; d++) {
    typename V::Reg k[NT][NV];
    for (int t = 0; t < NT; t++)
      for (int v = 0; v < NV; v++) k[t][v] = V::load(kt + t * tile_floats + d * kAttnTileKeys + v * V::kLanes);
    for (int i = 0; i < QG; i++) {
      const typename V::Reg b = V::set1(q[i][d]);
      for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++) acc[i][t][v] = V::fma(b, k[t][v], acc[i][t][v]);
    }
  }
  for (int i = 0; i < QG; i++)
    for (int t = 0; t < NT; t++)
      for (int v = 0; v < NV; v++)
        V::store(s + (i0 + i) * ld + t * kAttnTileKeys + v * V::kLanes, acc[i][t][v]);
}

// scores<V, qg, nt> for any qg <= QG, nt <= NT (the groups left at the edges).
template <class V, int QG, int NT>
void scores_upto(int qg, int nt, const AttnQueries& a, int64_t i0, const float* kt, float* s,
                 int64_t ld) {
  if constexpr (QG > 1)
    if (qg < QG) return scores_upto<V, QG - 1, NT>(qg, nt, a, i0, kt, s, ld);
  if constexpr (NT > 1)
    if (nt < NT) return scores_upto<V, QG, NT - 1>(qg, nt, a, i0, kt, s, ld);
  scores<V, QG, NT>(a, i0, kt, s, ld);
}

// The tile's keys j that query i sees: [lo, hi]; empty when lo > hi.
struct KeyRange {
  int64_t lo, hi;
  bool empty() const { return lo > hi; }
};

inline KeyRange keys_of(const AttnQueries& a, int64_t i, const AttnTile& t) {
  const int64_t lo = a.lo[i] - t.key0, hi = a.hi[i] - t.key0;
  return {lo > 0 ? lo : 0, hi < t.n - 1 ? hi : t.n - 1};
}

template <class V>
float exp_one(float x) {
  float lanes[V::kLanes];
  V::store(lanes, V::exp(V::set1(x)));
  return lanes[0];
}

// Query i's softmax step over tile t: its scores sp[0, 16) become the weights p (zero
// outside its keys); updates m[i] and l[i] and returns alpha, the factor on its sum.
template <class V>
float softmax_step(const AttnQueries& a, int64_t i, const AttnTile& t, float* sp) {
  constexpr int NV = kKeyVecs<V>;
  constexpr int64_t L = V::kLanes;
  const KeyRange r = keys_of(a, i, t);
  if (r.empty()) return 1.f;
  if (a.softcap > 0.f)
    for (int64_t j = 0; j < kAttnTileKeys; j++) sp[j] = a.softcap * std::tanh(sp[j] * a.scale / a.softcap);
  typename V::Reg s[NV];
  for (int v = 0; v < NV; v++) {
    s[v] = V::load(sp + v * L);
    if (a.softcap <= 0.f) s[v] = V::mul(s[v], V::set1(a.scale));
  }
  typename V::Reg top = V::set1(-INFINITY);
  for (int v = 0; v < NV; v++) top = V::max(top, V::keep_lanes(s[v], v * L, r.lo, r.hi, -INFINITY));
  const float m_old = a.m[i], m_new = std::fmax(m_old, V::reduce_max(top));
  const float alpha = m_old == m_new ? 1.f : exp_one<V>(m_old - m_new);
  typename V::Reg sum = V::zero();
  for (int v = 0; v < NV; v++) {
    const typename V::Reg e = V::keep_lanes(V::exp(V::sub(s[v], V::set1(m_new))), v * L, r.lo, r.hi, 0.f);
    V::store(sp + v * L, e);
    sum = v == 0 ? e : V::add(sum, e);  // lane j + 8 joins lane j first, as reduce folds
  }
  a.l[i] = a.l[i] * alpha + V::reduce(sum);
  a.m[i] = m_new;
  return alpha;
}

// out = out · alpha, then out += p_j · v_j over keys r, for head dims [d0, Dh) of one query.
template <class V>
void accumulate_one(const AttnQueries& a, int64_t i, const AttnTile& t, const float* p, float alpha,
                    KeyRange r, int64_t d0) {
  constexpr int64_t L = V::kLanes;
  float* o = a.out[i];
  int64_t d = d0;
  for (; d + L <= a.Dh; d += L) {
    typename V::Reg acc = V::load(o + d);
    if (alpha != 1.f) acc = V::mul(acc, V::set1(alpha));
    for (int64_t j = r.lo; j <= r.hi; j++) acc = V::fma(V::set1(p[j]), V::load(t.v[j] + d), acc);
    V::store(o + d, acc);
  }
  for (; d < a.Dh; d++) {
    float acc = o[d];
    if (alpha != 1.f) acc *= alpha;
    for (int64_t j = r.lo; j <= r.hi; j++) acc = std::fma(p[j], t.v[j][d], acc);
    o[d] = acc;
  }
}

// accumulate_one for QP queries from i0 that all see every key of the tile (their
// weights p + (i0 + i) * ld, factors alpha[i0 + i]): each value row chunk is loaded once
// for all of them. Head dims past the last whole chunk of 4 vectors go one by one.
template <class V, int QP>
void accumulate_group(const AttnQueries& a, int64_t i0, const AttnTile& t, const float* p,
                      int64_t ld, const float* alpha) {
  constexpr int64_t L = V::kLanes, C = 4;
  int64_t d = 0;
  for (; d + C * L <= a.Dh; d += C * L) {
    typename V::Reg acc[QP][C];
    for (int i = 0; i < QP; i++)
      for (int c = 0; c < C; c++) {
        acc[i][c] = V::load(a.out[i0 + i] + d + c * L);
        if (alpha[i0 + i] != 1.f) acc[i][c] = V::mul(acc[i][c], V::set1(alpha[i0 + i]));
      }
    for (int64_t j = 0; j < t.n; j++) {
      typename V::Reg vj[C];
      for (int c = 0; c < C; c++) vj[c] = V::load(t.v[j] + d + c * L);
      for (int i = 0; i < QP; i++) {
        const typename V::Reg b = V::set1(p[(i0 + i) * ld + j]);
        for (int c = 0; c < C; c++) acc[i][c] = V::fma(b, vj[c], acc[i][c]);
      }
    }
    for (int i = 0; i < QP; i++)
      for (int c = 0; c < C; c++) V::store(a.out[i0 + i] + d + c * L, acc[i][c]);
  }
  if (d < a.Dh)
    for (int i = 0; i < QP; i++)
      accumulate_one<V>(a, i0 + i, t, p + (i0 + i) * ld, alpha[i0 + i], {0, t.n - 1}, d);
}

template <class V, int QP>
void accumulate_upto(int qp, const AttnQueries& a, int64_t i0, const AttnTile& t, const float* p,
                     int64_t ld, const float* alpha) {
  if constexpr (QP > 1)
    if (qp < QP) return accumulate_upto<V, QP - 1>(qp, a, i0, t, p, ld, alpha);
  accumulate_group<V, QP>(a, i0, t, p, ld, alpha);
}

// The value sums of tile t for every query: runs of up to QP queries that see the whole
// tile together, the others one by one.
template <class V, int QP>
void accumulate_tile(const AttnQueries& a, const AttnTile& t, const float* p, int64_t ld,
                     const float* alpha) {
  auto sees_all = [&](int64_t i) {
    const KeyRange r = keys_of(a, i, t);
    return r.lo == 0 && r.hi == t.n - 1;
  };
  for (int64_t i = 0; i < a.num;) {
    int run = 0;
    while (run < QP && i + run < a.num && sees_all(i + run)) run++;
    if (run > 0) {
      accumulate_upto<V, QP>(run, a, i, t, p, ld, alpha);
      i += run;
    } else {
      accumulate_one<V>(a, i, t, p + i * ld, alpha[i], keys_of(a, i, t), 0);
      i++;
    }
  }
}

// Scores of every query against every tile (QG queries x NT tiles per pass), then per
// tile in key order each query's softmax step and the value sums (QP queries at a time).
template <class V, int QG, int NT, int QP>
void attend_tiles(const AttnQueries& a, const AttnTile* tiles, int64_t num_tiles, float* scratch) {
  const int64_t ld = num_tiles * kAttnTileKeys;          // scores / weights per query
  float* kt = scratch;                                    // [num_tiles, Dh, kAttnTileKeys]
  float* sp = kt + num_tiles * a.Dh * kAttnTileKeys;      // [num, num_tiles, kAttnTileKeys]
  float* alpha = sp + a.num * ld;                         // [num_tiles, num]
  for (int64_t t = 0; t < num_tiles; t++) transpose_keys<V>(tiles[t], a.Dh, kt + t * a.Dh * kAttnTileKeys);
  for (int64_t i = 0; i < a.num; i += QG)
    for (int64_t t = 0; t < num_tiles; t += NT)
      scores_upto<V, QG, NT>(int(std::min<int64_t>(QG, a.num - i)), int(std::min<int64_t>(NT, num_tiles - t)), a,
                             i, kt + t * a.Dh * kAttnTileKeys, sp + t * kAttnTileKeys, ld);
  for (int64_t t = 0; t < num_tiles; t++) {
    float* at = alpha + t * a.num;
    for (int64_t i = 0; i < a.num; i++) at[i] = softmax_step<V>(a, i, tiles[t], sp + i * ld + t * kAttnTileKeys);
    accumulate_tile<V, QP>(a, tiles[t], sp + t * kAttnTileKeys, ld, at);
  }
}

template <class V>
void attend_finish(const AttnQueries& a) {
  constexpr int64_t L = V::kLanes;
  for (int64_t i = 0; i < a.num; i++) {
    float* o = a.out[i];
    const typename V::Reg l = V::set1(a.l[i]);
    int64_t d = 0;
    for (; d + L <= a.Dh; d += L) V::store(o + d, V::div(V::load(o + d), l));
    for (; d < a.Dh; d++) o[d] /= a.l[i];
  }
}

}  // namespace
}  // namespace tandem::cpu
