// Private to cuda_attention_prefill_sm90.cu: the producer warpgroup's copies into the
// 128-byte-swizzled tiles wgmma reads (layout: cuda_attention_sm90.cuh). Each of the 128
// producer threads keeps one 16-byte column chunk and walks rows 128 / chunks-per-row
// apart, so a warp reads whole cache rows (coalesced) and every thread later touches only
// the chunks it copied itself.
//
// Zeros, never stale bytes, wherever a row reads nothing: keys past the tile's last
// visible key, block-table entries outside the table or the pool, head-dim padding, and
// query rows past the row's queries (P = 0 times an uninitialized NaN in V would poison
// O; a zero query row scores 0 everywhere).
#pragma once

#include <cuda.h>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_attention_prefill_tiles.cuh"
#include "backend/cuda/cuda_attention_sm90.cuh"

namespace tandem::attn::sm90 {

constexpr int kProducerThreads = 128;

// ROWS Q rows (t.off: element offsets in q, -1 = no row) of D padded columns at dst,
// copied by THREADS threads (ptid 0..THREADS-1).
template <int D, int ROWS, int THREADS = kProducerThreads>
__device__ __forceinline__ void load_q_sw(uint32_t dst, const TileRows<ROWS>& t, const AttnArgs& a,
                                          int ptid) {
  constexpr int kChunks = D / 8, kRowStep = THREADS / kChunks;
  const int c = ptid % kChunks;
  const uint32_t col = uint32_t((c / 8) * ROWS * 128);
  const bool col_ok = c * 8 < a.head_dim;
#pragma unroll 4
  for (int r = ptid / kChunks; r < ROWS; r += kRowStep) {
    const bool ok = col_ok && t.off[r] >= 0;
    const bf16* src = ok ? a.q + t.off[r] + c * 8 : a.q;
    cp_async_16(dst + col + sw128(r, c % 8), src, ok ? 16 : 0);
  }
}

// bf16 cache rows of keys [kt, kt + ROWS) of kv head kvh (keys past kend read as zero)
// into a swizzled tile at dst, by cp.async from THREADS threads (ptid 0..THREADS-1). The
// block-table reads of up to 16 rows are issued before their copies, so they are in
// flight together instead of one dependent read before each copy (issue 26, round 2).
template <int D, int ROWS, int THREADS = kProducerThreads>
__device__ __forceinline__ void load_tile_sw_hoisted(uint32_t dst, const bf16* cache,
                                                     const AttnArgs& a, const int32_t* bt_row,
                                                     int kvh, int kt, int kend, int ptid) {
  constexpr int kChunks = D / 8, kRowStep = THREADS / kChunks;
  constexpr int kRows = ROWS / kRowStep;  // rows this thread copies
  constexpr int kBatch = kRows < 16 ? kRows : 16;
  static_assert(kRows % kBatch == 0, "whole batches");
  const int c = ptid % kChunks, r0 = ptid / kChunks;
  const uint32_t col = uint32_t((c / 8) * ROWS * 128);
  const bool col_ok = c * 8 < a.head_dim;
#pragma unroll
  for (int b = 0; b < kRows; b += kBatch) {
    int slot[kBatch];  // pool slot of each row, meaningful where its ok bit is set
    uint32_t ok = 0;   // bit i: row r0 + (b + i)·kRowStep reads the cache
#pragma unroll
    for (int i = 0; i < kBatch; i++) {
      const int j = kt + r0 + (b + i) * kRowStep;
      const int bi = a.block_shift >= 0 ? j >> a.block_shift : j / a.block_size;
      const int off = a.block_shift >= 0 ? j & (a.block_size - 1) : j % a.block_size;
      const bool in = col_ok && j <= kend && bi < a.max_blocks;
      const int blk = in ? __ldg(bt_row + bi) : -1;  // predicated, no copy between: they overlap
      slot[i] = blk * a.block_size + off;
      if (in && blk >= 0 && blk < a.num_blocks) ok |= 1u << i;
    }
#pragma unroll
    for (int i = 0; i < kBatch; i++) {
      const int r = r0 + (b + i) * kRowStep;
      const bool v = (ok >> i) & 1u;
      const bf16* src = cache + (int64_t(v ? slot[i] : 0) * a.num_kv_heads + kvh) * a.head_dim;
      cp_async_16(dst + col + sw128(r, c % 8), v ? src + c * 8 : cache, v ? 16 : 0);
    }
  }
}

// e4m3 cache rows (16 elements a chunk) of keys [kt, kt + ROWS), raw, into a linear
// staging tile at raw (ROWS x D bytes), by cp.async; widen_tile_sw converts them.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile_raw(uint32_t raw, const uint8_t* cache, const AttnArgs& a,
                                              const int32_t* bt_row, int kvh, int kt, int kend,
                                              int ptid) {
  constexpr int kChunks = D / 16, kRowStep = kProducerThreads / kChunks;
  const int c = ptid % kChunks;
  const bool col_ok = c * 16 < a.head_dim;  // an e4m3 head is whole chunks (Dh % 16 == 0)
#pragma unroll 4
  for (int r = ptid / kChunks; r < ROWS; r += kRowStep) {
    const uint8_t* row = kt + r <= kend && col_ok ? kv_row(cache, bt_row, a, kvh, kt + r) : nullptr;
    cp_async_16(raw + uint32_t((r * kChunks + c) * 16), row ? row + c * 16 : cache, row ? 16 : 0);
  }
}

// The chunks this thread staged (load_tile_raw, landed) widened to bf16 into the swizzled
// tile at dst: raw chunk c of a row becomes bf16 chunks 2c and 2c + 1, which lie in the
// row's 64-column block 2c / 8 = c / 4. Zero bytes are e4m3 +0.
template <int D, int ROWS>
__device__ __forceinline__ void widen_tile_sw(uint32_t dst, uint32_t raw, int ptid) {
  constexpr int kChunks = D / 16, kRowStep = kProducerThreads / kChunks;
  const int c = ptid % kChunks;
  const uint32_t col = uint32_t((c / 4) * ROWS * 128);
#pragma unroll 4
  for (int r = ptid / kChunks; r < ROWS; r += kRowStep) {
    uint4 lo, hi;
    cuda::bf16x16_from_f8x16(ld_shared_16(raw + uint32_t((r * kChunks + c) * 16)), lo, hi);
    st_shared_16(dst + col + sw128(r, (2 * c) % 8), lo);
    st_shared_16(dst + col + sw128(r, (2 * c + 1) % 8), hi);
  }
}

// ---------------------------------------------------------------- TMA (bf16 cache)

// Keys [kt, kt + ROWS) of kv head kvh into the swizzled tile at dst by TMA, issued by the
// 32 lanes of one warp: lane i takes box i (box = min(block size, ROWS) keys, one per
// 64-column block), so the block-table reads of a tile are in flight together. Needs a
// power-of-two block size and kt a multiple of the box (choose_sm90_loads and the
// kernel's tile start see to both); every box then starts on a 1024-byte swizzle atom.
// A table entry outside the table or the pool points the box past the tensor (zeros);
// keys outside the CTA's range in a filled box read whatever the pool holds there (K/V
// of another row, or zeros): the softmax masks them (P = 0), and the caller copies the
// V tiles that hold such keys with load_tile_sw_warp instead, since 0 times a NaN left
// there by a diverged earlier request would still poison O.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile_tma(uint32_t dst, const CUtensorMap* map,
                                              const AttnArgs& a, const int32_t* bt_row, int kvh,
                                              int kt, uint32_t bar, int lane) {
  const int box = a.block_size < ROWS ? a.block_size : ROWS;
  const int r = lane * box;
  if (r >= ROWS) return;
  const int j = kt + r, bi = j >> a.block_shift, off = j & (a.block_size - 1);
  const int blk = bi < a.max_blocks ? __ldg(bt_row + bi) : -1;
  const int slot =
      blk >= 0 && blk < a.num_blocks ? blk * a.block_size + off : a.num_blocks * a.block_size;
#pragma unroll
  for (int cb = 0; cb < D / 64; cb++)
    tma_load_3d(dst + uint32_t(cb * ROWS * 128 + r * 128), map, cb * 64, kvh, slot, bar);
}

// Keys [kt, kt + ROWS) of kv head kvh into the swizzled tile at dst by cp.async from one
// warp (lane 0..31), a row at a time; keys outside [kbegin, kend] and table entries
// outside the table or the pool read as zeros. The TMA producer's edge tiles: at most
// two a CTA, so it is lean in registers rather than fast.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile_sw_warp(uint32_t dst, const bf16* cache,
                                                  const AttnArgs& a, const int32_t* bt_row, int kvh,
                                                  int kt, int kbegin, int kend, int lane) {
  constexpr int kChunks = D / 8, kRowStep = 32 / kChunks;
  static_assert(32 % kChunks == 0, "whole rows per warp pass");
  const int c = lane % kChunks;
  const uint32_t col = uint32_t((c / 8) * ROWS * 128);
  const bool col_ok = c * 8 < a.head_dim;
#pragma unroll 2
  for (int r = lane / kChunks; r < ROWS; r += kRowStep) {
    const int j = kt + r;
    const bf16* row =
        col_ok && j >= kbegin && j <= kend ? kv_row(cache, bt_row, a, kvh, j) : nullptr;
    cp_async_16(dst + col + sw128(r, c % 8), row ? row + c * 8 : cache, row ? 16 : 0);
  }
}

}  // namespace tandem::attn::sm90
