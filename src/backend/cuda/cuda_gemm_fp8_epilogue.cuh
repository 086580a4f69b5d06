// The FP8 wgmma GEMM's parameters and how a consumer warpgroup finishes a segment of its
// run (cuda_gemm_fp8_sm90.cu; sm_90a only; its header describes the protocol): a whole
// tile goes out through the warpgroup's staging rows; a part of a tile cut over several
// CTAs is added up with the others in part order by whichever CTA finishes it.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_gemm_fp8_consume.cuh"
#include "backend/cuda/cuda_linear_fp8.cuh"
#include "backend/cuda/cuda_sm90.cuh"

namespace tandem::fp8gemm {

using cuda::bf16;

constexpr int kStagePitch = 64 + 4;  // floats per staged token row (cuda_gemm_fp8_plan.cpp)
constexpr int kStageRows = 32;       // token rows per warpgroup's staging

// What the epilogue needs: the scales, the bias and where the result goes.
struct Epilogue {
  void* out;              // [T, N] bf16, or f32 when out_f32
  const float* x_scales;  // [T]
  cuda::WeightScales ws;
  const bf16* bias;  // [N] or null
  int T, N;
  bool out_f32;
  bool vec_out;  // N % 4 == 0 and out 16-byte aligned: 4 channels per store
};

struct GemmParams {
  Epilogue e;
  Fp8WgmmaWork work;
  int token_tiles, stages;
  float* partials;  // [2·ctas slots][2 warpgroups][64·BN] f32 when tiles are cut
  int* counters;    // [2·ctas]: zero between launches, when tiles are cut
  int fast_accum;   // 1: mma_fast (all of K in wgmma's accumulator), 0: mma (promoted)
};

// out[t, n..n+3] = v · s_x[t] · s_w(n..) (+ bias), channels past N skipped.
__device__ __forceinline__ void finish4(const Epilogue& e, int t, int n, float (&v)[4]) {
  const float sx = e.x_scales[t];
  const int64_t at = int64_t(t) * e.N + n;
  if (e.vec_out && n + 3 < e.N) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      v[j] = v[j] * sx * e.ws.at(n + j, 0);
      if (e.bias) v[j] += cuda::to_f32(e.bias[n + j]);
    }
    if (e.out_f32) {
      *reinterpret_cast<float4*>(static_cast<float*>(e.out) + at) =
          make_float4(v[0], v[1], v[2], v[3]);
    } else {
      __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
      uint2 packed;
      packed.x = *reinterpret_cast<uint32_t*>(&lo);
      packed.y = *reinterpret_cast<uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(static_cast<bf16*>(e.out) + at) = packed;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; j++) {
    if (n + j >= e.N) break;
    float r = v[j] * sx * e.ws.at(n + j, 0);
    if (e.bias) r += cuda::to_f32(e.bias[n + j]);
    if (e.out_f32)
      static_cast<float*>(e.out)[at + j] = r;
    else
      static_cast<bf16*>(e.out)[at + j] = __float2bfloat16_rn(r);
  }
}

// The warpgroup's finished 64 channels x BN tokens out to `e`, through its staging rows
// (kStageRows rows of kStagePitch floats) in chunks of 32 tokens (16 where BN is not a
// multiple of 32).
template <int BN>
__device__ __forceinline__ void store_out(const float (&acc)[BN / 8][4], float* stage,
                                          const Epilogue& e, int cw, int wtid, int n0, int t0) {
  constexpr int kChunkNt = (BN / 8) % 4 == 0 ? 4 : 2;  // 8-token column groups per chunk
  constexpr int kChunk = 8 * kChunkNt;
  static_assert(kChunk <= kStageRows, "a chunk fits the staging rows");
  const int lane = wtid & 31, warp = wtid >> 5, g = lane >> 2, q = lane & 3;
  const int n = 16 * warp + g;  // the fragment's row: a channel of the warpgroup's 64
  const int j = (wtid % 16) * 4, nc = n0 + cw * 64 + j;  // 16 threads a token row
#pragma unroll
  for (int c0 = 0; c0 < BN / 8; c0 += kChunkNt) {
#pragma unroll
    for (int u = 0; u < kChunkNt; u++) {
      const int t = 8 * u + 2 * q;  // the fragment's columns t, t + 1: tokens
      stage[t * kStagePitch + n] = acc[c0 + u][0];
      stage[(t + 1) * kStagePitch + n] = acc[c0 + u][1];
      stage[t * kStagePitch + n + 8] = acc[c0 + u][2];
      stage[(t + 1) * kStagePitch + n + 8] = acc[c0 + u][3];
    }
    sm90::named_bar_sync(kBarWarpgroup0 + cw, 128);
    if (nc < e.N) {
      for (int r = wtid / 16; r < kChunk; r += 8) {
        const int t = t0 + 8 * c0 + r;
        if (t >= e.T) break;
        const float4 v4 = *reinterpret_cast<const float4*>(stage + r * kStagePitch + j);
        float v[4] = {v4.x, v4.y, v4.z, v4.w};
        finish4(e, t, nc, v);
      }
    }
    sm90::named_bar_sync(kBarWarpgroup0 + cw, 128);  // read before the next chunk lands
  }
}

// A warpgroup's partial sums in a workspace slot, in fragment order: float4 nt of thread
// wtid at [nt · 128 + wtid] (coalesced; only this kernel reads them back).
template <int BN>
__device__ __forceinline__ void write_part(const float (&acc)[BN / 8][4], float* slot, int wtid) {
  float4* dst = reinterpret_cast<float4*>(slot);
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++)
    dst[nt * 128 + wtid] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
}

// acc += a slot's sums, 8 float4 loads in flight at a time (all of them at once would
// need another BN/2 registers beside acc).
template <int BN>
__device__ __forceinline__ void add_part(float (&acc)[BN / 8][4], const float* slot, int wtid) {
  const float4* src = reinterpret_cast<const float4*>(slot);
#pragma unroll
  for (int nt0 = 0; nt0 < BN / 8; nt0 += 8) {
#pragma unroll
    for (int nt = nt0; nt < nt0 + 8 && nt < BN / 8; nt++) {
      const float4 v = __ldcg(src + nt * 128 + wtid);  // L2: never a stale L1 line
      acc[nt][0] += v.x;
      acc[nt][1] += v.y;
      acc[nt][2] += v.z;
      acc[nt][3] += v.w;
    }
    asm volatile("" ::: "memory");  // the next loads stay behind these adds
  }
}

// CTA c's part of a cut tile (cuda_gemm_fp8_sm90.cu's header has the protocol): true when
// this warpgroup finishes the tile, acc then holding the whole sum; false when another CTA
// will.
template <int BN>
__device__ __forceinline__ bool fix_up(float (&acc)[BN / 8][4], const GemmParams& p, int cw,
                                       int wtid, int c, int tile, int* flag) {
  const Fp8WgmmaWork& w = p.work;
  const int first = w.first_cta(tile, c), parts = w.last_cta(tile, c) - first + 1;
  int* counter = p.counters + 2 * first + cw;
  const int bar = kBarWarpgroup0 + cw;
  auto slot = [&](int cta) {
    return p.partials + (int64_t(w.slot(cta, tile)) * 2 + cw) * (64 * BN);
  };
  sm90::named_bar_sync(bar, 128);  // every thread has read the flag's last value
  if (c == first) {
    if (wtid == 0) *flag = cuda::load_acquire(counter) == parts - 1;
    sm90::named_bar_sync(bar, 128);
    if (*flag) {  // every other part is in: add them to this one, in part order
#pragma unroll
      for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[nt][e] = 0.f + acc[nt][e];  // as the other branch's 0 + p0
      for (int j = 1; j < parts; j++) add_part<BN>(acc, slot(first + j), wtid);
      if (wtid == 0) atomicExch(counter, 0);
      return true;
    }
    sm90::named_bar_sync(bar, 128);  // the flag read before it is written again
  }
  write_part<BN>(acc, slot(c), wtid);
  sm90::named_bar_sync(bar, 128);  // every thread's stores before the count
  if (wtid == 0) *flag = cuda::atomic_add_acq_rel(counter, 1) == parts - 1;
  sm90::named_bar_sync(bar, 128);
  if (!*flag) return false;
  zero<BN>(acc);  // the last to arrive: every part, its own too, is in the workspace
  for (int j = 0; j < parts; j++) add_part<BN>(acc, slot(first + j), wtid);
  if (wtid == 0) atomicExch(counter, 0);
  return true;
}

}  // namespace tandem::fp8gemm
