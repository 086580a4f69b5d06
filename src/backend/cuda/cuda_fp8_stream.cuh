// The FP8 weight stream's consumers (cuda_gemv_fp8.cu says why they are shaped so): the
// ring's geometry for e4m3 rows, a warp's mmas over a stage, and the loop that turns a
// CTA's share of a weight into outputs. Two kernels run it: the few-row FP8 linear
// (cuda_gemv_fp8.cu) and the decode layer's tail, which streams four weights through one
// ring (cuda_layer_tail.cu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_stream_input.cuh"
#include "backend/cuda/cuda_weight_scales.h"
#include "backend/cuda/cuda_weight_stream.cuh"

namespace tandem::cuda {

inline constexpr int kFp8Chunk = 2048;                // columns (bytes) of a row per stage
inline constexpr int kFp8RowStride = kFp8Chunk + 64;  // all 32 banks once per 8 lanes' loads
using Fp8Ring = WeightRing<uint8_t, kFp8Chunk, kFp8RowStride>;
inline constexpr int kFp8WarpCols = kFp8Chunk / kStreamConsumerWarps;  // 128: two segments
inline constexpr int kFp8MaxRows = kFp8GemvMaxRows;  // x rows: the mma's 8 columns
inline constexpr int kFp8MaxXBytes = 32 * 1024;      // x [M, K] staged as e4m3 bytes
inline constexpr int kFp8MaxXScales = kFp8MaxXBytes / kStreamBlockK;  // (token, block) pairs
// Cross-warp partial sums: [2 group parities][M][16 rows][16 warps] f32.
constexpr int fp8_red_bytes(int M) { return 2 * M * kStreamRows * kStreamConsumerWarps * 4; }

// A warp's four mmas over its 128 columns of a stage: rows g and g + 8 of the stage,
// token g of x (zeros for g >= M). Columns at or past `cols` (a row's last, partial
// chunk) add nothing: cols % 16 == 0, so a lane's 16 bytes are all in or all out, and such
// lanes feed zeros (the stage may hold an older chunk's bytes there).
__device__ __forceinline__ void fp8_mma_stage(float (&d)[4], const uint8_t* stage, const uint8_t* xs,
                                              int M, int K, int k0, int cols, int warp, int lane) {
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int seg = 0; seg < kFp8WarpCols / 64; seg++) {
    const int k_seg = warp * kFp8WarpCols + seg * 64;
    if (k_seg >= cols) continue;  // warp-uniform: the mma needs every lane
    const int k = k_seg + c * 16;
    const bool in = k < cols;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const uint4 ra = in ? *reinterpret_cast<const uint4*>(stage + g * kFp8RowStride + k) : zero;
    const uint4 rb =
        in ? *reinterpret_cast<const uint4*>(stage + (g + 8) * kFp8RowStride + k) : zero;
    const uint4 xv = in && g < M ? *reinterpret_cast<const uint4*>(xs + g * K + k0 + k) : zero;
    mma_e4m3(d, ra.x, rb.x, ra.y, rb.y, xv.x, xv.y);
    mma_e4m3(d, ra.z, rb.z, ra.w, rb.w, xv.z, xv.w);
  }
}

// The consumer warps' pass over a CTA's share `wk` of an e4m3 weight [N, K] scaled by `ws`,
// whose stages the ring numbers from `first` on: x is xs [M, K] (e4m3) with its scales sx
// (per token, G = 1, or per token and 128 columns, G = ⌈K / 128⌉: block weights), red the
// cross-warp sums (fp8_red_bytes(M)). Each output's sum, scaled (and + bias), goes to
// store(m, n, value).
//
// A warp's partial sums for its columns are kept across the chunks of a row group and
// added across the 16 warps through shared memory when the group's last chunk is done
// (double-buffered by group parity, so one barrier per group suffices); then
// out[m, n] = sum · s_x[m] · s_w[n] (+ bias). Block scales of 128 columns (block_n any,
// block_k 128): a warp's 128 columns of a stage are exactly one column block, so it folds
// its mma sums into a running total scaled by s_x[m, kb] · s_w(n, kb) after every stage.
template <typename Store>
__device__ __forceinline__ void consume_fp8_stream(const Fp8Ring& ring, const StreamWork& wk,
                                                   int first, const uint8_t* xs, const double* sx,
                                                   float* red, const WeightScales& ws,
                                                   const __nv_bfloat16* bias, int M, Store store) {
  const int N = wk.N, K = wk.K;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const bool block = ws.granularity == ScaleGranularity::Block;
  const int G = block ? (K + kStreamBlockK - 1) / kStreamBlockK : 1;
  float d[4] = {0.f, 0.f, 0.f, 0.f};    // this stage's (or, unblocked, this group's) sums
  float tot[4] = {0.f, 0.f, 0.f, 0.f};  // blocks: the group's scaled sums
  const int g = lane >> 2, c = lane & 3;
  for (int j = 0; j < wk.steps; j++) {
    const int chunk = j % wk.chunks;
    const int k0 = chunk * kFp8Chunk, cols = min(kFp8Chunk, K - k0);
    const int group = wk.group_begin + j / wk.chunks;
    const bool folds = block && warp * kFp8WarpCols < cols;
    const int kb = (k0 + warp * kFp8WarpCols) / kStreamBlockK;
    // Blocks: this stage's weight scales of rows g and g + 8, loaded before the wait so
    // their latency hides behind it (read after the mmas they would stall every stage).
    float sw[2] = {0.f, 0.f};
    if (folds)
#pragma unroll
      for (int h = 0; h < 2; h++)
        sw[h] = ws.at<int>(min(group * kStreamRows + g + h * 8, N - 1), kb);
    const uint8_t* stage = ring.wait(first + j);
    fp8_mma_stage(d, stage, xs, M, K, k0, cols, warp, lane);
    ring.release(first + j, lane);
    if (folds) {  // fold this warp's column block
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int m = 2 * c + (q & 1);
        if (m < M) tot[q] += d[q] * (float(sx[m * G + kb]) * sw[q >> 1]);
        d[q] = 0.f;
      }
    }
    if (chunk != wk.chunks - 1) continue;
    // The group's sums: this warp's (rows g, g + 8; tokens 2c, 2c + 1) into red, then one
    // thread per (token, row) adds the 16 warps' and stores.
    float* r = red + (group & 1) * (M * kStreamRows * kStreamConsumerWarps);
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int m = 2 * c + (q & 1), row = g + (q >> 1) * 8;
      if (m < M) r[(m * kStreamRows + row) * kStreamConsumerWarps + warp] = block ? tot[q] : d[q];
      d[q] = 0.f;
      tot[q] = 0.f;
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kStreamConsumers) : "memory");
    const int t = int(threadIdx.x);
    if (t < M * kStreamRows) {
      const int m = t / kStreamRows, row = t % kStreamRows;
      const int n = group * kStreamRows + row;
      if (n < N) {
        const float4* p = reinterpret_cast<const float4*>(r + t * kStreamConsumerWarps);
        float s = 0.f;
#pragma unroll
        for (int q = 0; q < kStreamConsumerWarps / 4; q++) {
          const float4 v = p[q];
          s += (v.x + v.y) + (v.z + v.w);
        }
        if (!block) s *= float(sx[m]) * ws.at<int>(n, 0);
        if (bias != nullptr) s += __bfloat162float(bias[n]);
        store(m, n, s);
      }
    }
  }
}

}  // namespace tandem::cuda
