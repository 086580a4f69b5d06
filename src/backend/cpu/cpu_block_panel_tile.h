// The panel kernels of the Int8 product (cpu_block_panels.h), written once over an
// instruction set I (PanelAvx2 in cpu_block_avx2.cpp, PanelVnni in cpu_block_avx512vnni.cpp),
// and the panels' packing and the activations' quantization (AVX2, run on either).
//
// A tile is one panel (16 weight rows; I::kRows of them per vector) against MT x rows. Per
// weight block and unit j, for each x row: isum = Σ_chunks dot(levels, 4 x bytes broadcast),
// then local += S_j · f32(isum − corr_j) (+ C_j · bsum_j), and per block acc += d_x · local.
// The integer sums are exact; each output's float operations are one fixed sequence whatever
// MT, the step's other rows or the thread that runs it, so its bits depend on none of them.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_block_decode.h"
#include "backend/cpu/cpu_block_panels.h"

namespace tandem::cpu {
namespace {

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The activation rows of a tile.
template <int MT>
struct TileRows {
  const int8_t* q[MT];
  const float* d[MT];
  const int32_t* corr[MT];
  const float* bsum[MT];
};

template <BlockKind K, int MT>
TileRows<MT> tile_rows(const BlockPanelOperands& g, int64_t m0) {
  constexpr PanelShape P = kPanelShapes[int(K)];
  TileRows<MT> x;
  for (int m = 0; m < MT; m++) {
    x.q[m] = g.acts.q + (m0 + m) * g.K;
    x.d[m] = g.acts.d + (m0 + m) * (g.K / P.elems);
    x.corr[m] = g.acts.corr + (m0 + m) * (g.K / P.unit);
    x.bsum[m] = g.acts.bsum + (m0 + m) * (g.K / P.unit);
  }
  return x;
}

// A panel block's scales for vector h of its rows: d (d / 16 for high nibbles) and dm, and
// where the type has them the int8 sc and mn of each unit.
template <class I, BlockKind K>
struct PanelScales {
  static constexpr PanelShape P = kPanelShapes[int(K)];
  typename I::VF d, d16, dm;
  const int8_t* sc;
  const int8_t* mn;
  PanelScales(const uint8_t* pb, int h) {
    const float* f = reinterpret_cast<const float*>(pb + P.d_offset()) + h * I::kRows;
    d = I::loadf(f);
    if constexpr (P.nibbles) d16 = I::mulf(d, I::set1f(0.0625f));
    if constexpr (P.min) dm = I::loadf(f + kPanelRows);
    sc = reinterpret_cast<const int8_t*>(pb + P.level_bytes()) + h * I::kRows;
    mn = sc + P.sc_bytes();
  }
  // S of unit u (its high-nibble half when hi): fl(d·sc), or d where sc = 1.
  typename I::VF S(int u, bool hi) const {
    const typename I::VF base = P.nibbles && hi ? d16 : d;
    if constexpr (P.scales) return I::mulf(base, I::cvt(I::widen8(sc + u * kPanelRows)));
    return base;
  }
  // C of unit u: fl(dm·mn), or dm where mn = 1.
  typename I::VF C(int u) const {
    if constexpr (P.scales) return I::mulf(dm, I::cvt(I::widen8(mn + u * kPanelRows)));
    return dm;
  }
};

// One weight block of a panel (vector h of its rows) against the tile's rows: local[m] gets
// Σ_units S·f32(isum − corr) (+ C·bsum). b: the block's index in the row.
template <class I, BlockKind K, int MT>
void panel_block(const uint8_t* pb, int h, int64_t b, const TileRows<MT>& x,
                 typename I::VF (&local)[MT]) {
  constexpr PanelShape P = kPanelShapes[int(K)];
  constexpr int kShare = P.nibbles ? 2 : 1;  // units read from one load
  constexpr int kChunks = P.unit / 4, kUnits = P.units();
  constexpr bool kSigned = I::kSignTrick && P.offset == 128;
  const PanelScales<I, K> scales(pb, h);
  const int64_t xk = b * P.elems, xu = b * kUnits;
#pragma GCC unroll 16
  for (int grp = 0; grp < kUnits / kShare; grp++) {
    typename I::VI isum[MT][kShare];
    for (int m = 0; m < MT; m++)
      for (int j = 0; j < kShare; j++) isum[m][j] = I::izero();
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; c++) {
      const uint8_t* src = pb + (grp * kChunks + c) * 64 + h * I::kRows * 4;
      typename I::VI lv[kShare];
      if constexpr (P.nibbles) {
        const typename I::VI raw = I::load(src);
        lv[0] = I::lo_nibbles(raw);
        lv[1] = I::hi_nibbles(raw);
      } else {
        lv[0] = I::load(src);
      }
      for (int j = 0; j < kShare; j++) {
        const int64_t k = xk + (grp * kShare + j) * P.unit + 4 * c;
        if constexpr (kSigned) {
          const typename I::VI w = I::to_signed(lv[j]), aw = I::abs8(w);
          for (int m = 0; m < MT; m++) isum[m][j] = I::dot_signed(isum[m][j], aw, w, x.q[m] + k);
        } else {
          for (int m = 0; m < MT; m++) isum[m][j] = I::dot(isum[m][j], lv[j], x.q[m] + k);
        }
      }
    }
    for (int j = 0; j < kShare; j++) {
      const int u = grp * kShare + j;
      const typename I::VF s = scales.S(u, j == 1);
      for (int m = 0; m < MT; m++) {
        typename I::VI v = isum[m][j];
        if constexpr (P.nibbles && I::kHiShift)
          if (j == 1) v = I::shift4(v);
        if constexpr (P.offset != 0 && !kSigned) v = I::sub_bcast(v, x.corr[m][xu + u]);
        local[m] = I::fma(I::cvt(v), s, local[m]);
      }
      if constexpr (P.min) {
        const typename I::VF c = scales.C(u);
        for (int m = 0; m < MT; m++) local[m] = I::fma(c, I::set1f(x.bsum[m][xu + u]), local[m]);
      }
    }
  }
}

// Panel `panel` (weight rows n0 … n0 + 15) against x rows [m0, m0 + MT).
template <class I, BlockKind K, int MT>
void panel_tile(const BlockPanelOperands& g, const uint8_t* panel, int64_t m0, int64_t n0) {
  constexpr PanelShape P = kPanelShapes[int(K)];
  constexpr int kBlockBytes = P.block_bytes();
  const TileRows<MT> x = tile_rows<K, MT>(g, m0);
  const int64_t blocks = g.K / P.elems;
  for (int h = 0; h < int(kPanelRows) / I::kRows; h++) {
    typename I::VF acc[MT];
    for (int m = 0; m < MT; m++) acc[m] = I::fzero();
    for (int64_t b = 0; b < blocks; b++) {
      typename I::VF local[MT];
      for (int m = 0; m < MT; m++) local[m] = I::fzero();
      panel_block<I, K, MT>(panel + b * kBlockBytes, h, b, x, local);
      for (int m = 0; m < MT; m++) acc[m] = I::fma(local[m], I::set1f(x.d[m][b]), acc[m]);
    }
    for (int m = 0; m < MT; m++) I::store(g.out + (m0 + m) * g.ldo + n0 + h * I::kRows, acc[m]);
  }
}

// Panels [g0, g1) against every x row: up to 64 x rows at a time (they stay in L2 while the
// panels pass), each panel against them I::kTile rows a tile.
template <class I, BlockKind K>
void panel_groups(const BlockPanelOperands& g, int64_t g0, int64_t g1) {
  constexpr PanelShape P = kPanelShapes[int(K)];
  constexpr int T = I::kTile;
  const int64_t panel_bytes = g.K / P.elems * P.block_bytes();
  for (int64_t mb = 0; mb < g.M; mb += 64) {
    const int64_t me = std::min(g.M, mb + 64);
    for (int64_t p = g0; p < g1; p++) {
      const uint8_t* panel = g.panels + p * panel_bytes;
      const int64_t n0 = p * kPanelRows;
      int64_t m = mb;
      for (; m + T <= me; m += T) panel_tile<I, K, T>(g, panel, m, n0);
      if constexpr (T > 3)
        if (me - m == 3) panel_tile<I, K, 3>(g, panel, m, n0), m += 3;
      if constexpr (T > 2)
        if (me - m == 2) panel_tile<I, K, 2>(g, panel, m, n0), m += 2;
      if (me - m == 1) panel_tile<I, K, 1>(g, panel, m, n0);
    }
  }
}

}  // namespace
}  // namespace tandem::cpu
