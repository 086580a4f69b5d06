// Prefill attention on Hopper (rows with >= 2 query tokens, bf16 or e4m3 cache, padded
// head dims 64 / 128 / 256): FlashAttention-3's shape on tandem's paged cache.
//
// A CTA is three warpgroups and owns 128 packed query rows (GQA packing as in
// cuda_attention_prefill_tiles.cuh) of one (sequence row, kv head):
//   - warpgroup 0, the producer, copies Q once and then K and V tiles of kBlockN keys
//     through the block table into two rings (K and V) of kStagesK / kStagesV shared-
//     memory stages, in wgmma's 128-byte-swizzled layout (cuda_attention_sm90_load.cuh),
//     in the order K0, K1, V0, K2, V1, ..., V(n-1): K a tile ahead of V, as the
//     consumers need them (bf16 and e4m3 producers below);
//   - warpgroups 1 and 2, the consumers, own 64 rows each, and overlap the softmax of
//     one tile with the P·V product of the one before (FlashAttention-3's intra-warpgroup
//     pipelining): issue S(i+1) = Q·K(i+1)ᵀ, issue O += P(i)·V(i), wait for S(i+1) alone,
//     mask and exponentiate it while P(i)·V(i) runs, wait for that, rescale O and pack
//     P(i+1). Both products are wgmma from shared-memory descriptors, P from registers
//     (its A fragment is S's accumulator fragment, cuda_attention_sm90.cuh). K(i) is
//     released as soon as S(i) is complete, V(i) after P(i)·V(i), so K's ring runs about
//     a tile ahead of V's.
// An e4m3 cache is copied raw into a staging buffer per ring and widened to bf16 by the
// producer thread that copied it; the consumers' math is the bf16 kernel's.
// Two producers for the bf16 cache (which one: choose_sm90_loads, cuda_attention_prefill.h):
// cp.async from 128 threads, row by row through the block table, with zero-fill for
// keys past the tile's last visible key, table entries outside the table or the pool and
// head-dim padding; or TMA (issue 26, round 4): a producer warp per ring issues a box per
// (paged block piece, 64-column block) of a tile, completing on the stage's `full`
// barrier by transaction bytes (cuda_attention_sm90_load.cuh, load_tile_tma). TMA cannot
// zero part of a box, and its tiles start on a box boundary (kmin rounded down), so a
// tile may hold keys outside the CTA's range [kmin, kmax]: in K the mask gives them
// -inf, but V's first and last tiles, where they lie, are copied by cp.async with
// zero-fill (P = 0 times a stale NaN would still be NaN).
//
// Phases: with S stages in its ring, tile t's K (or V) uses stage t mod S, for the
// n = t / S-th time. Consumers wait for `full[s]` with parity n & 1; the producer, from
// the second round on, waits for `empty[s]` with parity (n - 1) & 1 before overwriting
// it. `full` counts the producer threads that copy into its ring (128; with TMA one
// arrival that also expects the tile's bytes, and Q has a barrier of its own), `empty`
// the 256 consumer threads. No deadlock: every wait of the
// producer is on a release the consumers give before they wait for anything later in
// the copy order (K(t + 1) needs K(t + 1 - S_K)'s release, given in iteration t - S_K;
// V(t) needs V(t - S_V)'s, given at the end of iteration t - S_V; both S >= 2).
// e4m3 producer (round 1's): copy j is published after copy j + 1 is issued, so its
// arrival also waits on the release copy j + 1 needs; with S >= 2 that release still
// comes a consumer iteration before copy j is needed.
//
// bf16 cp.async producer (where TMA cannot run): a tile's block-table reads are hoisted
// ahead of its copies, and each copy is published by cp.async.mbarrier.arrive.noinc as this
// thread's part lands, so the producer never blocks on its own copies; the consumers fence
// the landed generic-proxy writes into the async proxy themselves after each `full` wait.
// e4m3 keeps the blocking producer above (it widens each tile itself).
//
// With TMA the consumer warpgroups take turns issuing their GEMMs (ping-pong, named barriers
// 1 and 2), so one warpgroup's softmax runs under the other's products, and the producer is
// a warp per ring (produce_tma). Why this form and not the others measured (TMA without
// the ping-pong, one producer warp for both rings, FA3's and FA4's other tricks):
// bench/RESULTS.md, "Moved from the kernel files (house issue)".
//
// Work split is the mma.sync kernel's: grid.x is an upper bound on the query tiles
// (ceil(T·G/128) + B), each CTA finds its (row, tile) on the device; grid.y = kv head.
// A persistent variant (a CTA per SM walking the (tile, kv head) items longest first, in
// FlashAttention-3's L2 sections, the next item's Q and first tiles under the last one's
// tail) was measured against this on an H100 (issue 45) and deleted: µs at 8k / 32k /
// 128k keys, this kernel / persistent, 985.6 / 974.5, 14086.7 / 14240.6, 222320 / 225021,
// and in a second round 995.7 / 1021.2, 14696 / 14386, 223274 / 225805: no steady gain.
#include <algorithm>
#include <atomic>
#include <climits>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_attention_prefill.h"
#include "backend/cuda/cuda_attention_prefill_tiles.cuh"
#include "backend/cuda/cuda_attention_sm90.cuh"
#include "backend/cuda/cuda_attention_sm90_load.cuh"
#include "backend/cuda/cuda_attention_sm90_softmax.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_mbarrier.cuh"
#include "backend/cuda/cuda_tensor_map.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cuda_attention_prefill_sm90.cu needs sm_90a (wgmma, setmaxnreg): see CMakeLists.txt"
#endif

namespace tandem::attn {

namespace {

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

// ---------------------------------------------------------------- producer

// Copy j of n tiles' 2n: K0 (with Q), then K(t + 1), V(t) for t = 0 .. n - 2, then
// V(n - 1).
struct Copy {
  int tile;
  bool is_v;
};
__device__ __forceinline__ Copy copy_of(int j, int num_tiles) {
  if (j == 2 * num_tiles - 1) return {num_tiles - 1, true};
  if (j == 0) return {0, false};
  return j % 2 == 1 ? Copy{(j + 1) / 2, false} : Copy{j / 2 - 1, true};
}

// e4m3: issues copy j once its stage is free, staged in raw buffer j mod 2 (two copies
// are in flight; the one two back has been widened). K and V rings have equal stages.
template <int D>
__device__ __forceinline__ void issue_copy_f8(const AttnArgs& a, const TileRows<kBlockM>& rows,
                                              const Ring& ring, const int32_t* bt_row, int kvh,
                                              int j, int num_tiles, int ptid) {
  using C = Config<D, true>;
  static_assert(C::kStagesK == C::kStagesV, "one stage count for both rings");
  const Copy cp = copy_of(j, num_tiles);
  const int t = cp.tile, s = t % C::kStagesV, n = t / C::kStagesV;
  if (n > 0) cuda::mbar_wait(&(cp.is_v ? ring.empty_v : ring.empty_k)[s], uint32_t((n - 1) & 1));
  if (j == 0) sm90::load_q_sw<D, kBlockM>(ring.q, rows, a, ptid);
  const uint8_t* cache = static_cast<const uint8_t*>(cp.is_v ? a.v : a.k);
  const uint32_t raw = ring.raw + uint32_t((j % 2) * C::kRawBytes);
  sm90::load_tile_raw<D, C::kBlockN>(raw, cache, a, bt_row, kvh, rows.kmin + t * C::kBlockN,
                                     rows.kmax, ptid);
  cp_async_commit();
}

// e4m3: copy j has landed (this thread's part): widen it, make it visible to wgmma and
// arrive on its `full` barrier.
template <int D>
__device__ __forceinline__ void publish_copy_f8(const Ring& ring, int j, int num_tiles, int ptid) {
  using C = Config<D, true>;
  const Copy cp = copy_of(j, num_tiles);
  const int s = cp.tile % C::kStagesV;
  const uint32_t dst = (cp.is_v ? ring.v : ring.k) + uint32_t(s * C::kTileBytes);
  const uint32_t raw = ring.raw + uint32_t((j % 2) * C::kRawBytes);
  sm90::widen_tile_sw<D, C::kBlockN>(dst, raw, ptid);
  sm90::fence_proxy_async();
  cuda::mbar_arrive(&(cp.is_v ? ring.full_v : ring.full_k)[s]);
}

// The e4m3 producer warpgroup: every copy in copy_of's order, two in flight. A staged
// tile is widened before the next copy into its staging buffer (two copies later) is
// issued.
template <int D>
__device__ void produce_f8(const AttnArgs& a, const TileRows<kBlockM>& rows, const Ring& ring,
                           int row, int kvh) {
  constexpr int kBlockN = Config<D, true>::kBlockN;
  const int ptid = int(threadIdx.x);  // 0..127
  const int32_t* bt_row = a.block_table + int64_t(row) * a.max_blocks;
  const int num_tiles = (rows.kmax - rows.kmin) / kBlockN + 1;
  for (int j = 0; j < 2 * num_tiles; j++) {
    issue_copy_f8<D>(a, rows, ring, bt_row, kvh, j, num_tiles, ptid);
    if (j > 0) {
      cp_async_wait<1>();  // copy j - 1 landed; j may still be in flight
      publish_copy_f8<D>(ring, j - 1, num_tiles, ptid);
    }
  }
  cp_async_wait<0>();
  publish_copy_f8<D>(ring, 2 * num_tiles - 1, num_tiles, ptid);
}

// Which copies a bf16 producer thread takes part in.
enum class Rings { kBoth, kK, kV };

// The bf16 producer: the copies of `rings`, in copy_of's order, shared by THREADS threads
// (ptid 0..THREADS-1), each published by the hardware as this thread's part lands. A copy
// is issued as soon as its stage is released, whatever the earlier copies' progress.
template <int D, int THREADS>
__device__ void produce_bf16(const AttnArgs& a, const TileRows<kBlockM>& rows, const Ring& ring,
                             int row, int kvh, int ptid, Rings rings) {
  using C = Config<D, false>;
  const int32_t* bt_row = a.block_table + int64_t(row) * a.max_blocks;
  const int num_tiles = (rows.kmax - rows.kmin) / C::kBlockN + 1;
  for (int j = 0; j < 2 * num_tiles; j++) {
    const Copy cp = copy_of(j, num_tiles);
    if ((rings == Rings::kK && cp.is_v) || (rings == Rings::kV && !cp.is_v)) continue;
    const int stages = cp.is_v ? C::kStagesV : C::kStagesK;
    const int t = cp.tile, s = t % stages, n = t / stages;
    if (n > 0) cuda::mbar_wait(&(cp.is_v ? ring.empty_v : ring.empty_k)[s], uint32_t((n - 1) & 1));
    if (j == 0) sm90::load_q_sw<D, kBlockM, THREADS>(ring.q, rows, a, ptid);  // lands with K0
    const uint32_t dst = (cp.is_v ? ring.v : ring.k) + uint32_t(s * C::kTileBytes);
    sm90::load_tile_sw_hoisted<D, C::kBlockN, THREADS>(
        dst, static_cast<const bf16*>(cp.is_v ? a.v : a.k), a, bt_row, kvh,
        rows.kmin + t * C::kBlockN, rows.kmax, ptid);
    sm90::cp_async_arrive_noinc(cuda::mbar_smem_addr(&(cp.is_v ? ring.full_v : ring.full_k)[s]));
  }
  // Nothing in flight when the thread leaves (wait_all: these copies are in no group).
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// The TMA producer (bf16): all 128 threads copy Q by cp.async (its own barrier), then
// warp 0 issues the K tiles and warp 1 the V tiles, each as soon as its stage is released
// and whatever the other ring's progress: by TMA with one arrive.expect_tx of the tile's
// bytes, or, for a V tile holding keys outside [rows.kmin, rows.kmax], by cp.async with
// zero-fill, landed and fenced into the async proxy before lane 0's arrival (at most the
// first and the last V tile: the V warp waits for those copies, the ring keeps the others
// in flight). Tiles start at kmin, a multiple of the box rows. A warp per ring, so that a
// V tile never waits behind the next K tile's release (one warp for both: 15-18% slower).
template <int D>
__device__ void produce_tma(const AttnArgs& a, const TileRows<kBlockM>& rows, const Ring& ring,
                            int row, int kvh, int kmin, const CUtensorMap* map_k,
                            const CUtensorMap* map_v) {
  using C = Config<D, false>;
  const int ptid = int(threadIdx.x);  // 0..127
  sm90::load_q_sw<D, kBlockM>(ring.q, rows, a, ptid);
  sm90::cp_async_arrive_noinc(cuda::mbar_smem_addr(ring.full_q));
  const int lane = ptid & 31, warp = ptid >> 5;
  if (warp < 2) {
    const bool v_warp = warp == 1;
    if (lane == 0) sm90::prefetch_tensor_map(v_warp ? map_v : map_k);
    const int32_t* bt_row = a.block_table + int64_t(row) * a.max_blocks;
    const int num_tiles = (rows.kmax - kmin) / C::kBlockN + 1;
    for (int j = 0; j < 2 * num_tiles; j++) {
      const Copy cp = copy_of(j, num_tiles);
      if (cp.is_v != v_warp) continue;  // the other warp's ring
      const int stages = cp.is_v ? C::kStagesV : C::kStagesK;
      const int t = cp.tile, s = t % stages, n = t / stages;
      if (n > 0)
        cuda::mbar_wait(&(cp.is_v ? ring.empty_v : ring.empty_k)[s], uint32_t((n - 1) & 1));
      uint64_t* bar = &(cp.is_v ? ring.full_v : ring.full_k)[s];
      const uint32_t dst = (cp.is_v ? ring.v : ring.k) + uint32_t(s * C::kTileBytes);
      const int kt = kmin + t * C::kBlockN;
      if (cp.is_v && (kt < rows.kmin || kt + C::kBlockN - 1 > rows.kmax)) {
        sm90::load_tile_sw_warp<D, C::kBlockN>(dst, static_cast<const bf16*>(a.v), a, bt_row, kvh,
                                               kt, rows.kmin, rows.kmax, lane);
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        sm90::fence_proxy_async();
        __syncwarp();
        if (lane == 0) cuda::mbar_arrive(bar);
        continue;
      }
      if (lane == 0) cuda::mbar_arrive_expect(bar, uint32_t(C::kTileBytes));
      __syncwarp();
      sm90::load_tile_tma<D, C::kBlockN>(dst, cp.is_v ? map_v : map_k, a, bt_row, kvh, kt,
                                         cuda::mbar_smem_addr(bar), lane);
    }
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");  // Q landed before the thread leaves
}

// ---------------------------------------------------------------- consumers

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

// A consumer warpgroup (cw = 0 or 1): rows 64·cw .. 64·cw + 63 of the CTA's tile; key
// tiles from kmin.
template <int D, typename KV, bool kTma, bool kPingPong>
__device__ void consume(const AttnArgs& a, const TileRows<kBlockM>& rows, const Ring& ring, int cw,
                        int kmin) {
  constexpr bool kFence = sizeof(KV) == 2 && !kTma;  // the cp.async bf16 producer does not fence
  using C = Config<D, sizeof(KV) == 1>;
  constexpr int kBlockN = C::kBlockN, NV = D / 8, SK = C::kStagesK, SV = C::kStagesV;
  const int wtid = int(threadIdx.x) - 128 * (cw + 1), lane = wtid & 31, warp = wtid >> 5;
  const int r0 = cw * 64 + warp * 16 + (lane >> 2);
  const ConsumerRows cr{{rows.lo[r0], rows.lo[r0 + 8]},
                        {rows.hi[r0], rows.hi[r0 + 8]},
                        kmin,
                        rows.hi_min,
                        rows.lo_max};
  const int num_tiles = (rows.kmax - kmin) / kBlockN + 1;
  const uint32_t q_rows = ring.q + uint32_t(cw * 64 * 128);  // 64 rows = 8 swizzle atoms
  auto k_tile = [&](int t) { return ring.k + uint32_t((t % SK) * C::kTileBytes); };
  auto v_tile = [&](int t) { return ring.v + uint32_t((t % SV) * C::kTileBytes); };
  auto full_k = [&](int t) { wait_full<kFence>(&ring.full_k[t % SK], uint32_t((t / SK) & 1)); };
  auto full_v = [&](int t) { wait_full<kFence>(&ring.full_v[t % SV], uint32_t((t / SV) & 1)); };
  float o[NV][4], s[kBlockN / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float alpha[2];
  uint32_t pa[kBlockN / 16][4];
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;
#pragma unroll
  for (int nt = 0; nt < kBlockN / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;

  if constexpr (kTma) wait_full<true>(ring.full_q, 0);  // Q's cp.async writes
  if (kPingPong && cw == 1) sm90::named_bar_arrive(1, 256);
  full_k(0);
  turn_begin<kPingPong>(cw);
  issue_qk<D>(s, q_rows, k_tile(0));
  turn_end<kPingPong>(cw, false);
  sm90::wgmma_wait<0>();
  sm90::fence_operands(s);
  cuda::mbar_arrive(&ring.empty_k[0]);
  score_and_softmax<kBlockN>(s, a, cr, 0, m, l, alpha, lane);  // O = 0: alpha unused
  pack_p<kBlockN>(pa, s);
  sm90::fence_operands(o);
  sm90::fence_operands(pa);
  // Every tile but the last: S(t + 1) overlaps P(t)·V(t). No branch inside, so ptxas can
  // see that wait<1> retires S's group before its registers are read. K(t + 1) is waited
  // for before the warpgroup takes its turn (FlashAttention-3's order), so a late K tile
  // never holds the other warpgroup's products back; V is still waited for inside.
  for (int t = 0; t + 1 < num_tiles; t++) {
    full_k(t + 1);
    turn_begin<kPingPong>(cw);
    issue_qk<D>(s, q_rows, k_tile(t + 1));
    full_v(t);
    issue_pv<D>(o, pa, v_tile(t));
    turn_end<kPingPong>(cw, false);
    sm90::wgmma_wait<1>();  // S(t + 1) complete; P(t)·V(t) may still run
    sm90::fence_operands(s);
    cuda::mbar_arrive(&ring.empty_k[(t + 1) % SK]);
    score_and_softmax<kBlockN>(s, a, cr, t + 1, m, l, alpha, lane);
    sm90::wgmma_wait<0>();
    sm90::fence_operands(o);
    sm90::fence_operands(pa);
    cuda::mbar_arrive(&ring.empty_v[t % SV]);
    rescale_o<NV>(o, alpha);
    pack_p<kBlockN>(pa, s);
    sm90::fence_operands(o);  // written before the next S group opens
    sm90::fence_operands(pa);
  }
  const int last = num_tiles - 1;
  turn_begin<kPingPong>(cw);
  full_v(last);
  issue_pv<D>(o, pa, v_tile(last));
  turn_end<kPingPong>(cw, true);
  sm90::wgmma_wait<0>();
  sm90::fence_operands(o);
  cuda::mbar_arrive(&ring.empty_v[last % SV]);
  store_rows<kBlockM, NV>(a, rows, r0, o, l, 0, lane);
}

// The producer warpgroup's part: e4m3, bf16 by TMA, or bf16 by cp.async (all 128
// threads on both rings).
template <int D, typename KV, bool kTma>
__device__ __forceinline__ void produce(const AttnArgs& a, const TileRows<kBlockM>& rows,
                                        const Ring& ring, int row, int kvh, int kmin,
                                        const CUtensorMap* map_k, const CUtensorMap* map_v) {
  const int ptid = int(threadIdx.x);  // 0..127
  if constexpr (kTma) {
    produce_tma<D>(a, rows, ring, row, kvh, kmin, map_k, map_v);
  } else if constexpr (sizeof(KV) == 1) {
    produce_f8<D>(a, rows, ring, row, kvh);
  } else {
    produce_bf16<D, 128>(a, rows, ring, row, kvh, ptid, Rings::kBoth);
  }
}

// map_k / map_v: the cache's tensor maps with the TMA producer (kTma), unused otherwise.
// The consumers take turns (ping-pong) where TMA feeds them; the cp.async producers are the
// limit elsewhere, and turns gain nothing there.
template <int D, typename KV, bool kTma, bool kPingPong = kTma>
__global__ void __launch_bounds__(kSm90Threads, 1)
    prefill_sm90_kernel(AttnArgs a, const __grid_constant__ CUtensorMap map_k,
                        const __grid_constant__ CUtensorMap map_v) {
  static_assert(!kTma || sizeof(KV) == 2, "TMA loads the bf16 cache only");
  using C = Config<D, sizeof(KV) == 1>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ TileRows<kBlockM> rows;
  __shared__ __align__(8) uint64_t bars[4][C::kStagesMax];  // full K, empty K, full V, empty V
  __shared__ __align__(8) uint64_t full_q;                  // TMA producer only

  const int tile = int(gridDim.x) - 1 - int(blockIdx.x);  // last (longest) tiles first
  const int kvh = int(blockIdx.y);
  int row, row_tile;
  if (!find_tile<kBlockM, kSm90Threads>(a, tile, row, row_tile)) return;
  if (threadIdx.x == 0) {
    // `full` counts the producer threads of its ring (TMA: the one expect_tx arrival),
    // `empty` every consumer thread.
    const uint32_t fills = kTma ? 1 : 128;
    cuda::mbar_init(&full_q, 128);
    for (int s = 0; s < C::kStagesK; s++) {
      cuda::mbar_init(&bars[0][s], fills);
      cuda::mbar_init(&bars[1][s], 256);
    }
    for (int s = 0; s < C::kStagesV; s++) {
      cuda::mbar_init(&bars[2][s], fills);
      cuda::mbar_init(&bars[3][s], 256);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // for the async proxy
  }
  setup_rows<kBlockM>(rows, a, row, row_tile, kvh);  // its barriers publish the mbarriers
  Ring ring;
  ring.q = (smem_addr(smem_raw) + 1023u) & ~1023u;
  ring.k = ring.q + uint32_t(C::kQBytes);
  ring.v = ring.k + uint32_t(C::kStagesK * C::kTileBytes);
  ring.raw = ring.v + uint32_t(C::kStagesV * C::kTileBytes);
  ring.full_k = bars[0];
  ring.empty_k = bars[1];
  ring.full_v = bars[2];
  ring.empty_v = bars[3];
  ring.full_q = &full_q;
  // TMA tiles start on a box boundary (box = min(block size, tile), a power of two).
  const int box = a.block_size < C::kBlockN ? a.block_size : C::kBlockN;
  const int kmin = kTma ? rows.kmin & -box : rows.kmin;
  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    produce<D, KV, kTma>(a, rows, ring, row, kvh, kmin, &map_k, &map_v);
  } else {
    sm90::setmaxnreg_inc<kConsumerRegs>();
    consume<D, KV, kTma, kPingPong>(a, rows, ring, wg - 1, kmin);
  }
}

template <int D, typename KV, bool kTma>
void launch_kernel(const AttnArgs& a, const CUtensorMap& map_k, const CUtensorMap& map_v,
                   cudaStream_t stream) {
  constexpr int smem = Config<D, sizeof(KV) == 1>::kSmem;
  auto kernel = prefill_sm90_kernel<D, KV, kTma>;
  static std::atomic<uint64_t> smem_ready;
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, smem_ready,
                           "attention prefill (sm90)");
  const int64_t tiles = (int64_t(a.num_tokens) * a.group + kBlockM - 1) / kBlockM + a.num_rows;
  cuda_require(tiles < INT_MAX, "attention prefill (sm90): too many query tiles");
  const dim3 grid(unsigned(tiles), unsigned(a.num_kv_heads), 1);
  kernel<<<grid, kSm90Threads, smem, stream>>>(a, map_k, map_v);
  TANDEM_CUDA_LAUNCHED("attention prefill kernel (sm90)");
}

template <int D>
void launch(const AttnArgs& a, cudaStream_t stream) {
  const CUtensorMap none{};
  const int64_t num_slots = int64_t(a.num_blocks) * a.block_size;
  if (a.kv_f8) return launch_kernel<D, uint8_t, false>(a, none, none, stream);
  if (cuda::choose_sm90_loads(a.kv_f8, a.head_dim, a.block_size, num_slots) ==
      cuda::Sm90Loads::CpAsync)
    return launch_kernel<D, bf16, false>(a, none, none, stream);
  const int box = std::min(a.block_size, Config<D>::kBlockN);
  const auto map = [&](const void* base) {
    return cuda::kv_tensor_map({base, a.head_dim, a.num_kv_heads, box, num_slots});
  };
  launch_kernel<D, bf16, true>(a, map(a.k), map(a.v), stream);
}

}  // namespace

int sm90_padded_head_dim(int head_dim) {
  for (int d : {64, 128, 256})
    if (head_dim > d / 2 && head_dim <= d) return d;
  return 0;
}

int prefill_sm90_smem_bytes(int head_dim, bool kv_f8) {
  // Static shared memory (the tile's rows, mbarriers, find_tile's scan) rides on top.
  constexpr int kStatic = int(sizeof(TileRows<kBlockM>)) + 512;
  switch (sm90_padded_head_dim(head_dim)) {
    case 64:
      return (kv_f8 ? Config<64, true>::kSmem : Config<64>::kSmem) + kStatic;
    case 128:
      return (kv_f8 ? Config<128, true>::kSmem : Config<128>::kSmem) + kStatic;
    case 256:
      return (kv_f8 ? Config<256, true>::kSmem : Config<256>::kSmem) + kStatic;
    default:
      return 0;
  }
}

void launch_prefill_sm90(const AttnArgs& a, cudaStream_t stream) {
  switch (sm90_padded_head_dim(a.head_dim)) {
    case 64:
      return launch<64>(a, stream);
    case 128:
      return launch<128>(a, stream);
    case 256:
      return launch<256>(a, stream);
    default:
      cuda_fail("attention prefill (sm90): head dim outside (32, 256]");
  }
}

}  // namespace tandem::attn
