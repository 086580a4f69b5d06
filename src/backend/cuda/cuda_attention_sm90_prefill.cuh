// Private to the two sm90 prefill kernels (cuda_attention_prefill_sm90.cu, a CTA per query
// tile; cuda_attention_persist_sm90.cu, persistent CTAs): the CTA's shape, its shared-memory
// plan, and the consumer warpgroups' two products and turns. Compiled for sm_90a only
// (wgmma, setmaxnreg); see CMakeLists.txt.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_attention_sm90.cuh"
#include "backend/cuda/cuda_mbarrier.cuh"

namespace tandem::attn {

// The persistent variant's launcher (cuda_attention_persist_sm90.cu): bf16 cache, the TMA
// producer's conditions (cuda::choose_sm90_loads == Tma), head dims padded to 64 / 128 /
// 256; `ctas` CTAs (>= 1) walk the (query tile, kv head) items.
void launch_prefill_persist_sm90(const AttnArgs& a, const CUtensorMap& map_k,
                                 const CUtensorMap& map_v, int ctas, cudaStream_t stream);

namespace sm90_prefill {

constexpr int kBlockM = 128;       // packed query rows per CTA, 64 per consumer warpgroup
constexpr int kSm90Threads = 384;  // producer warpgroup + 2 consumer warpgroups
// Registers per producer / consumer thread (setmaxnreg); build knobs for measurements.
#ifndef TANDEM_SM90_PRODUCER_REGS
#define TANDEM_SM90_PRODUCER_REGS 56
#endif
#ifndef TANDEM_SM90_CONSUMER_REGS
#define TANDEM_SM90_CONSUMER_REGS 224
#endif
constexpr int kProducerRegs = TANDEM_SM90_PRODUCER_REGS;
constexpr int kConsumerRegs = TANDEM_SM90_CONSUMER_REGS;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "one CTA's registers");

template <int D, bool F8 = false>
struct Config {
  static constexpr int kBlockN = D == 256 ? 64 : 128;  // keys per tile
  static constexpr int kStagesV = D == 64 ? 3 : 2;
  static constexpr int kStagesK = kStagesV;
  static constexpr int kStagesMax = kStagesK;
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kTileBytes = kBlockN * D * 2;      // one K or V tile
  static constexpr int kRawBytes = F8 ? kBlockN * D : 0;  // one staged e4m3 tile
  // Q, the K ring, the V ring, two raw tiles; +1024: the window is aligned up to a
  // swizzle atom inside the kernel. With d128 and a bf16 cache the CTA holds 167,056 B,
  // just under the 164 KiB carve-out (the variants measured past it lost: bench/RESULTS.md).
  static constexpr int kSmem = 1024 + kQBytes + (kStagesK + kStagesV) * kTileBytes + 2 * kRawBytes;
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "tiles start on swizzle atoms");
};

// The CTA's shared-memory buffers (shared-window addresses) and mbarriers.
struct Ring {
  uint32_t q, k, v, raw;  // raw: two e4m3 staging tiles, by copy parity
  uint64_t *full_k, *empty_k, *full_v, *empty_v;
  uint64_t* full_q;  // TMA producer only: Q's cp.async copies (K0's `full` otherwise)
};

// Issues S = Q·Kᵀ for the warpgroup's 64 rows (Q rows at q_rows, K tile at k_tile) as
// one wgmma group; the caller waits.
template <int D>
__device__ __forceinline__ void issue_qk(float (&s)[Config<D>::kBlockN / 8][4], uint32_t q_rows,
                                         uint32_t k_tile) {
  constexpr int kBlockN = Config<D>::kBlockN;
  sm90::fence_operands(s);
  sm90::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    const uint32_t k_off = uint32_t((ks % 4) * 32);  // 16 columns inside a 64-column block
    const uint64_t da = sm90::sw128_desc(q_rows + uint32_t((ks / 4) * kBlockM * 128) + k_off, 16);
    const uint64_t db = sm90::sw128_desc(k_tile + uint32_t((ks / 4) * kBlockN * 128) + k_off, 16);
    sm90::wgmma_ss<kBlockN>(s, da, db, ks > 0 ? 1 : 0);
  }
  sm90::wgmma_commit();
}

// Issues O += P·V (P as bf16 A fragments, 16 keys per wgmma) as one wgmma group; o and
// pa must not be touched until it completes. The caller fenced o and pa after writing
// them (fence_operands), before S's wgmma group opened: register accesses inside an open
// group would serialize the wgmmas (ptxas C7514).
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4],
                                         uint32_t (&pa)[Config<D>::kBlockN / 16][4],
                                         uint32_t v_tile) {
  constexpr int kBlockN = Config<D>::kBlockN;
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; kk++) {
    const uint64_t db = sm90::sw128_desc(v_tile + uint32_t(kk * 16 * 128), kBlockN * 128);
    sm90::wgmma_rs<D>(o, pa[kk], db);
  }
  sm90::wgmma_commit();
}

// Ping-pong: warpgroup cw issues its GEMMs between waiting on barrier 1 + cw and arriving
// on the other's, 2 - cw. Warpgroup 1 opens with an arrival on 1 so warpgroup 0 goes
// first, and skips its arrival after its last GEMMs, so each barrier sees as many
// arrivals as waits. Both warpgroups walk the same key tiles, so they take equal turns.
template <bool kPingPong>
__device__ __forceinline__ void turn_begin(int cw) {
  if constexpr (kPingPong) sm90::named_bar_sync(1 + cw, 256);
}
template <bool kPingPong>
__device__ __forceinline__ void turn_end(int cw, bool last) {
  if constexpr (kPingPong)
    if (!(last && cw == 1)) sm90::named_bar_arrive(2 - cw, 256);
}

// Waits for a `full` phase; with the bf16 producer the landed cp.async writes are then
// fenced into the async proxy here, by the reader, before its wgmma reads them.
template <bool kFenceAfter>
__device__ __forceinline__ void wait_full(uint64_t* bar, uint32_t parity) {
  cuda::mbar_wait(bar, parity);
  if constexpr (kFenceAfter) sm90::fence_proxy_async();
}

}  // namespace sm90_prefill
}  // namespace tandem::attn
