// The FP8 wgmma GEMM's consumer main loop (cuda_gemm_fp8_sm90.cu; sm_90a only). A consumer
// warpgroup (cw = 0 or 1) multiplies its 64 weight rows of a ring stage by the stage's
// token tile: per group, four k32 wgmmas over SN tokens into a fresh accumulator `part`,
// which is then added into the warpgroup's f32 total `acc` on the CUDA cores (promotion
// every 128 columns of K, as cuBLASLt and CUTLASS do by default: Hopper's e4m3 wgmma keeps
// only ~14 significant bits in its own running sum, so chaining all of K in it would cost
// ~1e-3 of relative error at K = 4096). A k-block is KG groups: tiles over 128 tokens run
// as two halves so that the fresh accumulator stays at most 64 floats.
//
// Fragments (cuda_wgmma_e4m3.cuh): acc[nt][0..1] = channel 16·warp + g, tokens 8nt + 2q,
// +1 and acc[nt][2..3] = that channel + 8, the same tokens (g = lane / 4, q = lane % 4).
//
// Ring protocol: k-block i of a CTA's run sits in stage i mod S for the (i / S)-th time;
// consumers wait for full[s] with the parity of that use and, once their wgmmas on it
// have completed, release it with one arrival per consumer warp (lane 0 after the warp's
// wgmma.wait_group: eight per use, not one per thread).
//
// Two loops, chosen per launch by CudaOptions::fp8_fast_accum (cuda_linear_fp8.h):
// mma_fast (the default) chains all of K in one accumulator and keeps a k-block's group in
// flight while the next is issued; the H200 timed it level with mma or up to 12% faster
// (gate_up at 256-512 rows), so the promotion's waits are not what limits this kernel.
// The loop (mma): issue a group, wait for it (wgmma.wait_group 0), add it; the two
// warpgroups overlap only as the scheduler lets them (one's adds under the other's
// wgmmas). Two loops that overlap by construction were measured and removed: the
// warpgroups taking turns to issue (ping-pong, named barriers) and two fresh accumulators
// with the next k-block's wgmmas issued before the last one's are added (wait_group 1);
// cuda_gemm_fp8_sm90.cu's header has their figures.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_mbarrier.cuh"
#include "backend/cuda/cuda_sm90.cuh"
#include "backend/cuda/cuda_wgmma_e4m3.cuh"

namespace tandem::fp8gemm {

constexpr int kBlockK = kFp8WgmmaBlockK;                     // bytes of K per stage
constexpr int kATileBytes = kFp8WgmmaChannelTile * kBlockK;  // 16 KB of weights per stage
constexpr int kConsumerWarps = 8;                            // arrivals per use of a stage
// Named barriers (0 is __syncthreads): one per consumer warpgroup (epilogue, fix-up).
constexpr int kBarWarpgroup0 = 2;

// The ring as a consumer sees it (shared-window addresses: 32-bit registers).
template <int BN>
struct Ring {
  static constexpr uint32_t kStageBytes = uint32_t(kATileBytes + BN * kBlockK);
  uint32_t full;   // full[0]: [stages] mbarriers, the producer's expect_tx + the TMA bytes
  uint32_t empty;  // empty[0]: [stages] mbarriers of kConsumerWarps arrivals
  uint32_t base;   // stage 0 (1024-byte aligned)
  uint32_t a_off;  // this warpgroup's 64 weight rows in a stage: cw · 8 KB
  int stages, cw, lane;
  __device__ __forceinline__ uint32_t a(int s) const {
    return base + uint32_t(s) * kStageBytes + a_off;
  }
  __device__ __forceinline__ uint32_t b(int s) const {
    return base + uint32_t(s) * kStageBytes + kATileBytes;
  }
  __device__ __forceinline__ void wait_full(int s, uint32_t phase) const {
    cuda::mbar_wait(full + 8u * uint32_t(s), phase);
  }
  // Lane 0's arrival, predicated rather than branched on: a divergent branch between a
  // wgmma and its wait makes ptxas serialize the wgmmas.
  __device__ __forceinline__ void release(int s) const {
    asm volatile(
        "{\n .reg .pred p;\n setp.eq.u32 p, %1, 0;\n"
        " @p mbarrier.arrive.shared::cta.b64 _, [%0];\n}" ::"r"(empty + 8u * uint32_t(s)),
        "r"(lane)
        : "memory");
  }
};

// A stage and the parity of its current use.
struct RingPos {
  int s = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ RingPos next(int stages) const {
    return s + 1 == stages ? RingPos{0, phase ^ 1u} : RingPos{s + 1, phase};
  }
};

// part = (or, kChain, +=) the warpgroup's 64 rows at `a` times the SN token rows at `b`,
// over 128 bytes of K.
template <int SN, bool kChain = false>
__device__ __forceinline__ void issue_group(float (&part)[SN / 8][4], uint32_t a, uint32_t b) {
  sm90::fence_operands(part);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockK / 32; kk++)  // 32 bytes of K per wgmma
    sm90::wgmma_e4m3<SN>(part, sm90::sw128_desc(a + uint32_t(kk * 32), 16),
                         sm90::sw128_desc(b + uint32_t(kk * 32), 16), kChain || kk > 0 ? 1 : 0);
  sm90::wgmma_commit();
}

// acc[H·SN/8 ...] += part, once part's group has completed.
template <int H, int BN, int SN>
__device__ __forceinline__ void promote(float (&acc)[BN / 8][4], float (&part)[SN / 8][4]) {
  sm90::fence_operands(part);
#pragma unroll
  for (int r = 0; r < SN / 8; r++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[H * (SN / 8) + r][e] += part[r][e];
}

template <int BN>
__device__ __forceinline__ void zero(float (&acc)[BN / 8][4]) {
#pragma unroll
  for (int i = 0; i < BN / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

// acc = Σ over nk k-blocks from `pos` (advanced past them): KG groups per k-block, each
// of BN / KG tokens (KG = 2 above 128 tokens, so that `part` stays at most 64 floats).
template <int BN>
__device__ __forceinline__ void mma(float (&acc)[BN / 8][4], const Ring<BN>& ring, RingPos& pos,
                                    int nk) {
  constexpr int KG = BN <= 128 ? 1 : 2, SN = BN / KG;
  static_assert(SN % 8 == 0, "a group is whole 8-token rows (1024-byte aligned in the stage)");
  float part[SN / 8][4];
  zero<BN>(acc);
  for (int k = 0; k < nk; k++) {
    ring.wait_full(pos.s, pos.phase);
#pragma unroll
    for (int h = 0; h < KG; h++) {
      issue_group<SN>(part, ring.a(pos.s), ring.b(pos.s) + uint32_t(h * SN * kBlockK));
      sm90::wgmma_wait<0>();
      if (h == KG - 1) ring.release(pos.s);
      if (h == 0) promote<0, BN, SN>(acc, part);
      if constexpr (KG > 1) {
        if (h == 1) promote<1, BN, SN>(acc, part);
      }
    }
    pos = pos.next(ring.stages);
  }
}

// acc = Σ over nk >= 1 k-blocks from `pos` (advanced past them), chained in wgmma's own
// accumulator (CudaOptions::fp8_fast_accum): k-block k's group is issued before k - 1's has
// completed, and a stage is released once the group after it is in flight (wait_group 1), so the
// tensor cores never wait for the CUDA cores. One group of all BN tokens (at most 128
// floats of accumulator).
template <int BN>
__device__ __forceinline__ void mma_fast(float (&acc)[BN / 8][4], const Ring<BN>& ring,
                                         RingPos& pos, int nk) {
  zero<BN>(acc);
  ring.wait_full(pos.s, pos.phase);
  issue_group<BN, true>(acc, ring.a(pos.s), ring.b(pos.s));
  RingPos prev = pos;
  pos = pos.next(ring.stages);
  for (int k = 1; k < nk; k++) {
    ring.wait_full(pos.s, pos.phase);
    issue_group<BN, true>(acc, ring.a(pos.s), ring.b(pos.s));
    sm90::wgmma_wait<1>();
    ring.release(prev.s);
    prev = pos;
    pos = pos.next(ring.stages);
  }
  sm90::wgmma_wait<0>();
  sm90::fence_operands(acc);
  ring.release(prev.s);
}

}  // namespace tandem::fp8gemm
