// The FP8 wgmma GEMM's consumer main loops (cuda_gemm_fp8_sm90.cu; sm_90a only). A consumer
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
// wgmma.wait_group: eight per use, not one per thread), in a cluster on both CTAs' empty
// barriers.
//
// The loops (Fp8WgmmaConsumer, cuda_gemm_fp8.h):
//   - mma_serial: issue a group, wait for it (wait_group 0), add it; the two warpgroups
//     overlap only as the scheduler lets them. With kPingPong they take turns to issue
//     (named barriers kBarTurn0 + cw: a warpgroup waits on its own and, once its group is
//     issued, arrives on the other's; warpgroup 1 lets 0 go first and skips its last
//     arrival, so no barrier is left half-arrived), so the tensor cores run one
//     warpgroup's group while the other adds;
//   - mma_dual1 (tiles up to 128 tokens): two fresh accumulators; the next k-block goes
//     into the other before this one is waited for (wait_group 1) and added, so the
//     warpgroup always has a group queued: acc + 2 parts = 3·BN/2 floats, 192 of the 232
//     registers at 128 tokens. Wider tiles run mma_serial: acc + 2 half-tile parts would
//     fit at 160 and 192 tokens (and quarters at 256), but with two groups per k-block
//     ptxas serializes the wgmmas (C7518, "WG.DP in divergent path"), however the loop
//     is arranged.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_sm90.cuh"
#include "backend/cuda/cuda_wgmma_e4m3.cuh"

namespace tandem::fp8gemm {

constexpr int kBlockK = kFp8WgmmaBlockK;                     // bytes of K per stage
constexpr int kATileBytes = kFp8WgmmaChannelTile * kBlockK;  // 16 KB of weights per stage
constexpr int kConsumerWarps = 8;                            // arrivals per use of a stage
// Named barriers (0 is __syncthreads): one per consumer warpgroup (epilogue, fix-up), and
// the ping-pong turns.
constexpr int kBarWarpgroup0 = 2, kBarTurn0 = 4;

// The ring as a consumer sees it (shared-window addresses: 32-bit registers).
template <int BN>
struct Ring {
  static constexpr uint32_t kStageBytes = uint32_t(kATileBytes + BN * kBlockK);
  uint32_t full;   // full[0]: [stages] mbarriers, the producer's expect_tx + the TMA bytes
  uint32_t empty;  // empty[0]: [stages] mbarriers of kConsumerWarps arrivals
  uint32_t base;   // stage 0 (1024-byte aligned)
  uint32_t a_off;  // this warpgroup's 64 weight rows in a stage: cw · 8 KB
  int stages, cw, lane;
  // Clusters of 2 (TMA multicast): the peer CTA's empty[0] (shared::cluster), whose
  // producer writes half of each token tile into this CTA's stages too; else 0.
  uint32_t peer_empty;
  __device__ __forceinline__ uint32_t a(int s) const {
    return base + uint32_t(s) * kStageBytes + a_off;
  }
  __device__ __forceinline__ uint32_t b(int s) const {
    return base + uint32_t(s) * kStageBytes + kATileBytes;
  }
  __device__ __forceinline__ void wait_full(int s, uint32_t phase) const {
    const uint32_t bar = full + 8u * uint32_t(s);
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{\n .reg .pred p;\n"
          " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          " selp.u32 %0, 1, 0, p;\n}"
          : "=r"(done)
          : "r"(bar), "r"(phase)
          : "memory");
  }
  // Lane 0's arrival (and, in a cluster, on the peer's barrier too: its producer refills
  // this CTA's stage as well), predicated rather than branched on: a divergent branch
  // between a wgmma and its wait makes ptxas serialize the wgmmas.
  __device__ __forceinline__ void release(int s) const {
    const uint32_t off = 8u * uint32_t(s);
    asm volatile(
        "{\n .reg .pred p, q;\n setp.eq.u32 p, %1, 0;\n setp.ne.and.u32 q, %2, 0, p;\n"
        " @p mbarrier.arrive.shared::cta.b64 _, [%0];\n"
        " @q mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%3];\n}" ::"r"(empty + off),
        "r"(lane), "r"(peer_empty), "r"(peer_empty + off)
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

// part = the warpgroup's 64 rows at `a` times the SN token rows at `b`, over 128 bytes of K.
template <int SN>
__device__ __forceinline__ void issue_group(float (&part)[SN / 8][4], uint32_t a, uint32_t b) {
  sm90::fence_operands(part);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockK / 32; kk++)  // 32 bytes of K per wgmma
    sm90::wgmma_e4m3<SN>(part, sm90::sw128_desc(a + uint32_t(kk * 32), 16),
                         sm90::sw128_desc(b + uint32_t(kk * 32), 16), kk > 0 ? 1 : 0);
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

// acc = Σ over nk k-blocks from `pos` (advanced past them). `ends_run`: these are the
// CTA's last k-blocks (ping-pong: warpgroup 1 skips its last arrival).
template <int BN, int KG, bool kPingPong>
__device__ __forceinline__ void mma_serial(float (&acc)[BN / 8][4], const Ring<BN>& ring,
                                           RingPos& pos, int nk, bool ends_run) {
  constexpr int SN = BN / KG;
  static_assert(SN % 8 == 0, "a group is whole 8-token rows (1024-byte aligned in the stage)");
  float part[SN / 8][4];
  zero<BN>(acc);
  for (int k = 0; k < nk; k++) {
    ring.wait_full(pos.s, pos.phase);
#pragma unroll
    for (int h = 0; h < KG; h++) {
      if constexpr (kPingPong) sm90::named_bar_sync(kBarTurn0 + ring.cw, 256);
      issue_group<SN>(part, ring.a(pos.s), ring.b(pos.s) + uint32_t(h * SN * kBlockK));
      if constexpr (kPingPong) {
        if (ring.cw == 0 || !ends_run || k + 1 < nk || h + 1 < KG)
          sm90::named_bar_arrive(kBarTurn0 + (1 - ring.cw), 256);
      }
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

// Dual, whole k-blocks (BN <= 128): k-blocks alternate between pa and pb.
template <int BN>
__device__ __forceinline__ void mma_dual1(float (&acc)[BN / 8][4], const Ring<BN>& ring,
                                          RingPos& pos, int nk) {
  float pa[BN / 8][4], pb[BN / 8][4];
  zero<BN>(acc);
  RingPos cur = pos;  // the k-block in flight in pa at the top of the loop
  ring.wait_full(cur.s, cur.phase);
  issue_group<BN>(pa, ring.a(cur.s), ring.b(cur.s));
  int k = 1;
  for (; k + 1 < nk; k += 2) {
    RingPos nxt = cur.next(ring.stages);
    ring.wait_full(nxt.s, nxt.phase);
    issue_group<BN>(pb, ring.a(nxt.s), ring.b(nxt.s));
    sm90::wgmma_wait<1>();
    ring.release(cur.s);
    promote<0, BN, BN>(acc, pa);
    cur = nxt;
    nxt = cur.next(ring.stages);
    ring.wait_full(nxt.s, nxt.phase);
    issue_group<BN>(pa, ring.a(nxt.s), ring.b(nxt.s));
    sm90::wgmma_wait<1>();
    ring.release(cur.s);
    promote<0, BN, BN>(acc, pb);
    cur = nxt;
  }
  if (k < nk) {  // one more k-block: into pb
    const RingPos nxt = cur.next(ring.stages);
    ring.wait_full(nxt.s, nxt.phase);
    issue_group<BN>(pb, ring.a(nxt.s), ring.b(nxt.s));
    sm90::wgmma_wait<1>();
    ring.release(cur.s);
    promote<0, BN, BN>(acc, pa);
    cur = nxt;
    sm90::wgmma_wait<0>();
    ring.release(cur.s);
    promote<0, BN, BN>(acc, pb);
  } else {
    sm90::wgmma_wait<0>();
    ring.release(cur.s);
    promote<0, BN, BN>(acc, pa);
  }
  pos = cur.next(ring.stages);
}

// The loop of consumer C for a tile of BN tokens (Dual runs wider tiles as Serial: see the
// header).
template <int BN, Fp8WgmmaConsumer C>
__device__ __forceinline__ void mma(float (&acc)[BN / 8][4], const Ring<BN>& ring, RingPos& pos,
                                    int nk, bool ends_run) {
  if constexpr (C == Fp8WgmmaConsumer::Dual && BN <= 128)
    mma_dual1<BN>(acc, ring, pos, nk);
  else
    mma_serial<BN, (BN <= 128 ? 1 : 2), C == Fp8WgmmaConsumer::PingPong>(acc, ring, pos, nk,
                                                                         ends_run);
}

}  // namespace tandem::fp8gemm
