// Panels: a copy of ggml block-type weights laid out for the Int8 product (cpu_block_gemm.h),
// made once when a weight is uploaded. They replace the ggml bytes of the rows they hold
// (cpu_block_panel_store.h): the Int8 product reads them, and embedding, downloads and the
// exact arithmetic decode their values from them.
//
// A panel is kPanelRows = 16 consecutive weight rows, interleaved so that one 64-byte load
// holds 4 bytes of each of the 16 rows (int32 lane r = row r). One vpdpbusd of that load
// against 4 activation bytes broadcast to every lane sums 4 products for each of the 16 rows at
// once: the 16 outputs of a panel come out in one register, with no horizontal sums, and a
// block's scales apply to 16 rows with one vector op. A panel holds, per weight block (32 or
// 256 values), one after the other:
//   levels  Nibbles (Q4_0, Q4_1, Q4_K): the type's own nibbles, chunk after chunk of 16 rows ×
//           4 bytes; the low nibbles are one unit of values, the high nibbles the next.
//           Bytes (the others): one unsigned level u per value (Block<K>::levels' u: Q8_0's
//           q + 128, Q6_K's 6-bit q, ...), 16 rows × 4 values a chunk.
//   sc, mn  [units][16] int8, the k-quants: each unit's integer scale (and min) per row.
//   d, dm   [16] f32: each row's block scale (and min scale: −dmin, or Q4_1's m).
// A unit is 16 or 32 values of one scale, k-contiguous (chunk c of unit j covers values
// j·unit + 4c … + 3 of the block), and its values are S·(u − o) + C with S = fl(d·sc) and
// C = fl(dm·mn) (sc = mn = 1 for the 32-value types; o the type's offset, Block<K>::kOffset),
// so the integer dot Σ u·q of a unit against the activations, less o·Σq, is scaled by S and C
// meets Σq. A kernel makes S and C in registers; a high-nibble unit is taken in place (16·u),
// under S / 16.
//
// Memory (held instead of the ggml bytes), against them: Q4_K 1.06×, Q4_0 1.11×, Q4_1 1.2×,
// Q8_0 1.06×, Q6_K 1.31×, Q5_K 1.59×, Q5_0 / Q5_1 1.64× / 1.67×, IQ4_NL 2.0×, IQ4_XS 1.97×; Q2_K
// and Q3_K (3–4×) have none and keep the row kernels. Plain data only (cpu_block_kernels.h's rule).
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_block_kernels.h"

namespace tandem::cpu {

constexpr int64_t kPanelRows = 16;

struct PanelShape {
  bool packed;   // the type has panels
  bool nibbles;  // levels as the type's nibbles (else one byte per value)
  bool min;      // a C term
  bool scales;   // integer scales per unit (else sc = mn = 1)
  int offset;    // o
  int elems;     // values per weight block
  int unit;      // values per unit
  // Derived.
  constexpr int units() const { return elems / unit; }
  constexpr int level_bytes() const { return int(kPanelRows) * (nibbles ? elems / 2 : elems); }
  constexpr int sc_bytes() const { return scales ? int(kPanelRows) * units() : 0; }
  constexpr int mn_bytes() const { return scales && min ? int(kPanelRows) * units() : 0; }
  constexpr int d_offset() const { return level_bytes() + sc_bytes() + mn_bytes(); }
  constexpr int block_bytes() const { return d_offset() + int(kPanelRows) * 4 * (min ? 2 : 1); }
};

// By BlockKind.
inline constexpr PanelShape kPanelShapes[] = {{true, true, false, false, 8, 32, 16},      // Q4_0
                                              {true, true, true, false, 0, 32, 16},       // Q4_1
                                              {true, false, false, false, 16, 32, 32},    // Q5_0
                                              {true, false, true, false, 0, 32, 32},      // Q5_1
                                              {true, false, false, false, 128, 32, 32},   // Q8_0
                                              {false, false, true, true, 0, 256, 16},     // Q2_K
                                              {false, false, false, true, 4, 256, 16},    // Q3_K
                                              {true, true, true, true, 0, 256, 32},       // Q4_K
                                              {true, false, true, true, 0, 256, 32},      // Q5_K
                                              {true, false, false, true, 32, 256, 16},    // Q6_K
                                              {true, false, false, false, 128, 32, 32},   // IQ4_NL
                                              {true, false, false, true, 128, 256, 32}};  // IQ4_XS

// The activations the panel kernels take, quantized as quantize_block_acts quantizes them
// (per block of the weight type's values: q, d), with each unit's Σq: corr = o_j·Σq (o_j the
// unit's offset as the kernel applies it: o, or 16·o for a high-nibble unit, or 0 where the
// kernel takes the levels signed) and bsum = Σq as f32 (types with a min).
struct PanelActs {
  const int8_t* q = nullptr;      // [M, K]
  const float* d = nullptr;       // [M, K / elems]
  const int32_t* corr = nullptr;  // [M, K / unit]
  const float* bsum = nullptr;    // [M, K / unit]
};

struct BlockPanelOperands {
  PanelActs acts;
  const uint8_t* panels = nullptr;  // [groups][K / elems] panel blocks
  float* out = nullptr;             // [M, ldo]: columns [16·g0, 16·g1) are written
  int64_t M = 0, K = 0, ldo = 0;
  BlockKind kind = BlockKind::Q4_0;
};

// out for the panels [g0, g1) (weight rows [16·g0, 16·g1)) and every x row.
void block_panel_groups_avx2(const BlockPanelOperands& g, int64_t g0, int64_t g1);
void block_panel_groups_avx512vnni(const BlockPanelOperands& g, int64_t g0, int64_t g1);

// Panels [g0, g1) of the block weight w [N, K] into dst (at its panel g0).
void block_pack_panels_avx2(BlockKind kind, const uint8_t* w, int64_t K, int64_t g0, int64_t g1,
                            uint8_t* dst);

// x rows [m0, m1) quantized for the panel kernels: q, d, corr, bsum of rows m (at m · their
// row length). signed_levels: the kernel takes offset-128 levels signed (AVX2's sign trick),
// so their corr is 0.
void block_panel_acts_avx2(BlockKind kind, bool signed_levels, const float* x, int64_t K,
                           int64_t m0, int64_t m1, int8_t* q, float* d, int32_t* corr, float* bsum);

}  // namespace tandem::cpu
