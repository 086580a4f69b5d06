// The device pieces of the block-type tensor-core tiles, shared by the dense linears
// (cuda_block_tiles.cu, which describes the scheme) and the grouped expert GEMMs
// (cuda_moe_block_tiles.cu). A CTA of 8 warps computes 128 weight rows x 64 x rows over
// steps of kStepK = 256 values of K, in two cp.async stages:
//   wd    [128][kStride]     the step's weights decoded to bf16 (one buffer)
//   xs    [2][64][kStride]   the step's x values (bf16); rows without an x row, values past K: 0
//   raw   [2][128][kRawStride] the step's weight bytes, 16-byte segments that keep each
//                            block's address mod 16 as in HBM
// Which weight row a tile row reads and which x row a tile row takes are the caller's: a
// RowOf functor (tile row r -> the first byte of an existing weight row) and an XRow functor
// (tile row r -> the first value of its x row, or null). The dense kernel clamps rows past N
// and takes x rows m0 + r; the expert kernel reads one expert's rows and gathers its slots.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_attention.cuh"  // the sm_80 primitives: cp.async, ldmatrix, mma.sync
#include "backend/cuda/cuda_block_decode.cuh"

namespace tandem::cuda::block_tiles {

using attn::cp_async_16;
using attn::cp_async_commit;
using attn::cp_async_wait;
using attn::ldsm_x4;
using attn::mma_bf16;
using attn::smem_addr;
using bf16 = __nv_bfloat16;

constexpr int kTileN = 128;              // weight rows of a CTA
constexpr int kTileM = 64;               // x rows of a CTA
constexpr int kStepK = 256;              // values of K per pipeline step
constexpr int kStride = kStepK + 8;      // bf16 elements per row of wd and xs
constexpr int kWarpsN = 4, kWarpsM = 2;  // 32 x 32 outputs a warp
constexpr int kThreads = 32 * kWarpsN * kWarpsM;
constexpr int kStages = 2;

// The per-type sizes: a step's bytes of one weight row, and its raw row in shared memory
// (the most 16-byte segments a chunk can touch at any offset mod 16).
template <DType T>
struct Step {
  static constexpr int kBlocks = kStepK / Octets<T>::kElems;  // 1 or 8
  static constexpr int kChunkBytes = kBlocks * Octets<T>::kBytes;
  static constexpr int kSegs = (15 + kChunkBytes + 15) / 16;
  static constexpr int kRawStride = 16 * kSegs;
  static constexpr int kWdBytes = kTileN * kStride * 2;
  static constexpr int kXsBytes = kTileM * kStride * 2;
  static constexpr int kRawBytes = kTileN * kRawStride;
  static constexpr int kSmem = kWdBytes + kStages * (kXsBytes + kRawBytes);
  // Q8_0's 204 KiB is the most: sm_90's 227 KiB a CTA holds every type (an A100's 163 KiB
  // does not: the callers ask the device).
  static_assert(kSmem <= 227 * 1024, "a CTA's shared memory");
};

// The buffers of one CTA's dynamic shared memory.
template <DType T>
struct Smem {
  uint8_t* base;
  __device__ bf16* wd() const { return reinterpret_cast<bf16*>(base); }
  __device__ bf16* xs(int s) const {
    return reinterpret_cast<bf16*>(base + Step<T>::kWdBytes + s * Step<T>::kXsBytes);
  }
  __device__ uint8_t* raw(int s) const {
    return base + Step<T>::kWdBytes + kStages * Step<T>::kXsBytes + s * Step<T>::kRawBytes;
  }
};

// Issues the copies of step kt's weights into one stage: each row's segments (only those its
// chunk touches: the last row never reads past the weight's end, save within its last
// 16-byte segment, which cannot leave the allocation's page).
template <DType T, class RowOf>
__device__ __forceinline__ void load_weights(uint8_t* raw, const RowOf& row_of, int kt, int K) {
  using S = Step<T>;
  const int kvals = min(kStepK, K - kt * kStepK);
  const int bytes = kvals / Octets<T>::kElems * Octets<T>::kBytes;
  for (int i = int(threadIdx.x); i < kTileN * S::kSegs; i += kThreads) {
    const int r = i / S::kSegs, s = i % S::kSegs;
    const uint8_t* p = row_of(r) + int64_t(kt) * S::kChunkBytes;
    const int off = int(reinterpret_cast<uintptr_t>(p) & 15);
    if (16 * s < off + bytes)
      cp_async_16(smem_addr(raw + r * S::kRawStride + 16 * s), p - off + 16 * s, 16);
  }
}

// Issues the copies of step kt's x values into one stage (zeros for rows x_row gives null
// and past K; `any` is a valid address for the copies of zero bytes).
template <class XRow>
__device__ __forceinline__ void load_x(bf16* xs, const XRow& x_row, const bf16* any, int kt,
                                       int K) {
  const int kvals = min(kStepK, K - kt * kStepK);
  constexpr int kSegsX = kStepK / 8;  // 16-byte segments of a row of xs
  for (int i = int(threadIdx.x); i < kTileM * kSegsX; i += kThreads) {
    const int r = i / kSegsX, s = i % kSegsX;
    const bf16* row = x_row(r);
    const bool ok = row != nullptr && 8 * s < kvals;
    cp_async_16(smem_addr(xs + r * kStride + 8 * s), ok ? row + int64_t(kt) * kStepK + 8 * s : any,
                ok ? 16 : 0);
  }
}

// An octet's 8 values s · (u − o) + b packed as bf16 (round to nearest): the f32 values of
// cuda::octet_values, bit for bit, without its integer-to-float conversions (a quarter-rate
// instruction, and 32k of them a CTA a step): a byte permute makes 2^23 + u as f32 bits
// (0x4B0000uu), and subtracting 2^23 + o is exact. Signed levels are biased by 128 first.
template <DType T>
__device__ __forceinline__ uint4 octet_bf16(const Octet& q) {
  using O = Octets<T>;
  constexpr float kBase = 8388608.f + float(O::kSigned ? 128 : O::kOffset);
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const uint32_t word = O::kSigned ? q.lv[i / 4] ^ 0x80808080u : q.lv[i / 4];
    const uint32_t bits = __byte_perm(word, 0x4B000000u, 0x7440u | uint32_t(i % 4));
    v[i] = fmaf(q.s, __uint_as_float(bits) - kBase, q.b);
  }
  uint4 out;
  uint32_t* w = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    w[i] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return out;
}

// raw -> wd: warp w decodes rows w, w + 8, ..., lane o octet o of each (values 8o .. 8o + 8
// of the step; zeros past K).
template <DType T, class RowOf>
__device__ __forceinline__ void decode_step(const uint8_t* raw, bf16* wd, const RowOf& row_of,
                                            int kt, int K) {
  using O = Octets<T>;
  using S = Step<T>;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int kvals = min(kStepK, K - kt * kStepK);
#pragma unroll 4
  for (int r = warp; r < kTileN; r += kThreads / 32) {
    const uint8_t* p = row_of(r) + int64_t(kt) * S::kChunkBytes;
    const int off = int(reinterpret_cast<uintptr_t>(p) & 15);
    uint4 v = make_uint4(0, 0, 0, 0);
    if (8 * lane < kvals) {
      const uint8_t* block = raw + r * S::kRawStride + off + (8 * lane / O::kElems) * O::kBytes;
      v = octet_bf16<T>(O::get(block, (8 * lane % O::kElems) / 8));
    }
    *reinterpret_cast<uint4*>(wd + r * kStride + 8 * lane) = v;
  }
}

// acc += wd[warp's 32 rows] · xs[warp's 32 rows]ᵀ over the step's first kvals values, for
// the warp's first `live` 8-column tiles (the rest are x rows without data: zeros, never
// stored; live is warp-uniform, so a 9-row step runs a quarter of a CTA's products).
// A thread's acc[i][t][e] is weight row wn·32 + 16i + lane/4 + 8(e/2), x row wm·32 + 8t +
// 2(lane%4) + e%2 (wn = warp % kWarpsN, wm = warp / kWarpsN).
__device__ __forceinline__ void mma_step(float (&acc)[2][4][4], const bf16* wd, const bf16* xs,
                                         int kvals, int live) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int wn = warp % kWarpsN, wm = warp / kWarpsN;
  // ldmatrix x4 addresses: A's four 8x8 pieces are (rows 0-7 | 8-15) x (k 0-7 | 8-15) in
  // the order a0..a3 of the fragment; B's are rows (m) 0-7 k 0-7, 0-7 k 8-15, 8-15 k 0-7,
  // 8-15 k 8-15: the b0, b1 of two 8-column tiles.
  const uint32_t a_base = smem_addr(wd + (wn * 32 + lane % 16) * kStride + (lane / 16) * 8);
  const uint32_t b_base =
      smem_addr(xs + (wm * 32 + (lane / 16) * 8 + lane % 8) * kStride + ((lane / 8) % 2) * 8);
  for (int kk = 0; kk < kvals; kk += 16) {
    uint32_t af[2][4], bfr[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) ldsm_x4(af[i], a_base + uint32_t((i * 16 * kStride + kk) * 2));
#pragma unroll
    for (int j = 0; j < 2; j++)
      if (2 * j < live) ldsm_x4(bfr[j], b_base + uint32_t((j * 16 * kStride + kk) * 2));
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int t = 0; t < 4; t++)
        if (t < live)
          mma_bf16(acc[i][t], af[i], bfr[t / 2][(t % 2) * 2], bfr[t / 2][(t % 2) * 2 + 1]);
  }
}

// The warp's live 8-column tiles when the tile's first `rows` x rows hold data.
__device__ __forceinline__ int live_columns(int rows) {
  return min(4, max(0, (rows - (int(threadIdx.x) / 32 / kWarpsN) * 32 + 7) / 8));
}

// acc += the products of steps [kt0, kt1) (kt0 < kt1), step kt0's copies into stage 0
// already issued by the caller (the dense kernel issues its weights before waiting on the
// previous kernel, x after) and not yet committed.
template <DType T, class RowOf, class XRow>
__device__ __forceinline__ void run_steps(const Smem<T>& sm, float (&acc)[2][4][4],
                                          const RowOf& row_of, const XRow& x_row, const bf16* any,
                                          int kt0, int kt1, int K, int live) {
  cp_async_commit();
  for (int kt = kt0; kt < kt1; kt++) {
    const int s = (kt - kt0) % kStages;
    cp_async_wait<0>();
    __syncthreads();  // stage s landed for all; every warp is done with the last step
    if (kt + 1 < kt1) {
      load_weights<T>(sm.raw(1 - s), row_of, kt + 1, K);
      load_x(sm.xs(1 - s), x_row, any, kt + 1, K);
    }
    cp_async_commit();
    decode_step<T>(sm.raw(s), sm.wd(), row_of, kt, K);
    __syncthreads();
    if (live > 0) mma_step(acc, sm.wd(), sm.xs(s), min(kStepK, K - kt * kStepK), live);
  }
}

}  // namespace tandem::cuda::block_tiles
