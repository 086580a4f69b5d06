// Private to the decode attention kernels (cuda_attention_decode*.cu): what a decode CTA
// does around its math — find its token and keys, look up cache slots, stream K/V tiles
// through the cp.async ring, and merge flash-decoding splits (arrival counter, last CTA
// merges) — shared by the bf16 kernel and the e4m3 one.
#pragma once

#include <atomic>
#include <type_traits>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem::attn::decode {

// The key tiling both decode kernels use at head dim DH: tiles of kBlockN keys, one per
// ring stage (kStages deep); the 4 warps form kKeyGroups groups that split a tile's keys,
// kDimWarps warps each that split the head dims; Q's fragments stay in registers up to
// Dh 256; the key groups merge through rows of kMergeStride floats.
template <int DH>
struct Tiling {
  static constexpr int kKeyGroups = DH <= 128 ? 4 : DH == 256 ? 2 : 1;  // KW
  static constexpr int kDimWarps = 4 / kKeyGroups;                      // DW
  static constexpr int kBlockN = DH <= 64 ? 128 : DH <= 128 ? 64 : DH == 256 ? 32 : 16;
  static constexpr int kGroupKeys = kBlockN / kKeyGroups;  // keys per key group and tile
  static constexpr int kStages = DH <= 256 ? 3 : 2;
  static constexpr bool kQInRegs = DH <= 256;
  static constexpr int kMergeStride = DH + 8;
  static_assert(kGroupKeys % 16 == 0, "a key group covers whole mma tiles");
};

// The token a decode CTA serves and the keys it sees: [lo, p] of row `row`.
struct DecodeItem {
  int token, row, p, lo;
};

// Grid x -> item: a row with exactly one token (by_row) or any token; false = nothing
// to compute. Independent loads are issued together, then `overlap()` runs while they
// are in flight: without by_row one round trip finds the token's position and, in the
// usual one-token-per-row step (T == B), its row. A token of a row of several (a verify
// step's chunk) sees its row's keys up to its own position: causal within the chunk,
// since the step wrote the chunk's keys to the cache before attention.
template <class Overlap>
__device__ __forceinline__ bool find_item(const AttnArgs& a, bool by_row, int x, DecodeItem& it,
                                          Overlap&& overlap) {
  if (by_row) {
    const int s0 = __ldg(a.seq_starts + x), s1 = __ldg(a.seq_starts + x + 1);
    overlap();
    it.row = x;
    it.token = s0;
    if (s1 - s0 != 1) return false;
    it.p = __ldg(a.positions + s0);
  } else {
    // x < T, but starts has B + 1 entries: with rows of several tokens (T > B) the guess
    // "row x" becomes row xs = min(x, B - 1), still one round trip for the last row.
    const int xs = min(x, a.num_rows - 1);
    const int p = __ldg(a.positions + x);
    const int s0 = __ldg(a.seq_starts + xs), s1 = __ldg(a.seq_starts + xs + 1);
    overlap();
    it.token = x;
    // Row b owns tokens [starts[b], starts[b+1]): the last row starting at or before x.
    it.row = s0 <= x && x < s1 ? xs : cuda::last_at_most(a.seq_starts, a.num_rows, x);
    it.p = p;
  }
  it.lo = first_key(it.p, a.window);
  return it.p >= 0;  // a negative position sees no key (outside the contract)
}

// Prefetches into L1 the block-table line(s) of keys [k0, k0 + KEYS) of row `row`, issued
// while the token's position is loading, so the first key_slot reads hit L1. k0 is a guess
// (split · kMinSplitKeys: right whenever the row's keys start at 0 and the split chunk is
// the minimum, i.e. short contexts, where this latency matters); a wrong guess costs a
// wasted line. Warp 0 issues one prefetch per 32-entry (128-byte) line.
template <int KEYS>
__device__ __forceinline__ void prefetch_table(const AttnArgs& a, int row, int k0) {
  const int lane = threadIdx.x;
  if (lane >= 32 || row >= a.num_rows) return;
  const int k1 = k0 + KEYS - 1;
  const int first = a.block_shift >= 0 ? k0 >> a.block_shift : k0 / a.block_size;
  const int last =
      min(a.block_shift >= 0 ? k1 >> a.block_shift : k1 / a.block_size, a.max_blocks - 1);
  if (first > last) return;
  if (lane == 0 || first + 32 * (lane - 1) < last)
    prefetch_l1(a.block_table + int64_t(row) * a.max_blocks + min(first + 32 * lane, last));
}

// The ROWS query heads [h0, h0 + ROWS) of kv head kvh (zeros past the group) into
// shared memory, row stride ST elements.
template <int DH, int ROWS, int ST>
__device__ __forceinline__ void load_q_heads(uint32_t dst, const AttnArgs& a, int token, int kvh,
                                             int h0) {
  constexpr int kChunksPerRow = DH / 8, kChunks = ROWS * kChunksPerRow;
  const int num_heads = min(ROWS, a.group - h0);
  for (int id = threadIdx.x; id < kChunks; id += kThreads) {
    const int r = id / kChunksPerRow, c = id % kChunksPerRow;
    const bool ok = r < num_heads && c * 8 < a.head_dim;
    const int64_t off =
        (int64_t(token) * a.num_q_heads + kvh * a.group + h0 + r) * a.head_dim + c * 8;
    cp_async_16(dst + uint32_t((r * ST + c * 8) * 2), ok ? a.q + off : a.q, ok ? 16 : 0);
  }
}

// Cache slot (block · block_size + offset) of key j >= 0, or -1 when j is past kend or
// its block-table entry lies outside the table or the pool (the key then reads as zeros).
__device__ __forceinline__ int key_slot(const int32_t* bt_row, const AttnArgs& a, int j, int kend) {
  if (j > kend) return -1;
  const int bi = a.block_shift >= 0 ? j >> a.block_shift : j / a.block_size;
  const int off = j - bi * a.block_size;
  const int blk = bi < a.max_blocks ? __ldg(bt_row + bi) : -1;
  return blk >= 0 && blk < a.num_blocks ? blk * a.block_size + off : -1;
}

// Slots of the tile starting at key kt: lane l holds key kt + 32·i + l in slots[i].
template <int NSL>
__device__ __forceinline__ void tile_slots(int (&slots)[NSL], const int32_t* bt_row,
                                           const AttnArgs& a, int kt, int kend) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < NSL; i++) slots[i] = key_slot(bt_row, a, kt + 32 * i + lane, kend);
}

// A slot tile_slots never yields: the key is left out of the copy and loaded later
// (KvRing::load_held).
constexpr int kHeldSlot = -2;

// Copies 16-byte chunk c of key `slot`'s K and V rows into row r of a stage (rows RS
// elements of KV apart); an invalid slot or a chunk past the head dim reads as zeros.
template <int RS, typename KV>
__device__ __forceinline__ void copy_kv_chunk(uint32_t k_dst, uint32_t v_dst, const AttnArgs& a,
                                              int kvh, int slot, int r, int c) {
  constexpr int CE = 16 / int(sizeof(KV));  // elements per 16-byte copy
  const bool ok = slot >= 0 && c * CE < a.head_dim;
  const int64_t off = ok ? (int64_t(slot) * a.num_kv_heads + kvh) * a.head_dim + c * CE : 0;
  const uint32_t dst = uint32_t((r * RS + c * CE) * int(sizeof(KV)));
  cp_async_16(k_dst + dst, static_cast<const KV*>(a.k) + off, ok ? 16 : 0);
  cp_async_16(v_dst + dst, static_cast<const KV*>(a.v) + off, ok ? 16 : 0);
}

// Copies the K and V rows of a BN-key tile (slots from tile_slots) into one stage:
// consecutive threads take consecutive 16-byte chunks of a row (coalesced), and fetch
// the row's slot from the lane that looked it up. Invalid keys and columns past the
// head dim read as zeros (masked keys must hold finite values: probability 0 times V);
// with kHold, a held key (kHeldSlot) is not copied at all. A stage row is RS elements of
// KV apart.
template <int DH, int BN, int RS, typename KV, bool kHold = false, int NSL>
__device__ __forceinline__ void load_kv_stage(uint32_t k_dst, uint32_t v_dst, const AttnArgs& a,
                                              int kvh, const int (&slots)[NSL]) {
  constexpr int kChunksPerRow = DH * int(sizeof(KV)) / 16;  // 16-byte copies per row
  constexpr int kIters = BN * kChunksPerRow / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; it++) {
    const int id = threadIdx.x + it * kThreads, r = id / kChunksPerRow, c = id % kChunksPerRow;
    int slot = __shfl_sync(0xffffffffu, slots[0], r & 31);
#pragma unroll
    for (int i = 1; i < NSL; i++) {
      const int x = __shfl_sync(0xffffffffu, slots[i], r & 31);
      if ((r >> 5) == i) slot = x;
    }
    if (kHold && slot == kHeldSlot) continue;
    copy_kv_chunk<RS, KV>(k_dst, v_dst, a, kvh, slot, r, c);
  }
}

// One CTA's share: its item, kv head kvh, heads [h0, h0 + HEADS) of that kv head's group,
// and split `split` of the token's keys, [k0, k1) in num_tiles tiles of BN keys.
struct DecodeWork {
  DecodeItem it;
  int kvh, h0, split, live, k0, k1, kend, num_tiles;
  const int32_t* bt_row;
};

// The work of this CTA (grid = (X, Hkv · ceil(G / HEADS), num_splits)); false when it
// has none (no item, or a split past the token's keys: not counted, not merged). The
// first STAGES tiles' block-table lines are prefetched while the item's position loads.
template <int HEADS, int BN, int STAGES>
__device__ __forceinline__ bool find_work(const AttnArgs& a, const SplitArgs& sp, DecodeWork& w) {
  const auto prefetch = [&] {  // row guess: x
    prefetch_table<STAGES * BN>(a, blockIdx.x, blockIdx.z * kMinSplitKeys);
  };
  if (!find_item(a, sp.by_row, blockIdx.x, w.it, prefetch)) return false;
  const int head_groups = (a.group + HEADS - 1) / HEADS;
  w.kvh = blockIdx.y / head_groups;
  w.h0 = (blockIdx.y % head_groups) * HEADS;
  const int keys = w.it.p - w.it.lo + 1, chunk = split_chunk(sp.num_splits, keys);
  w.live = (keys + chunk - 1) / chunk;  // splits holding keys: 0 .. live - 1
  w.split = blockIdx.z;
  w.k0 = w.it.lo + w.split * chunk;
  if (w.split >= w.live) return false;
  w.k1 = min(w.it.p + 1, w.k0 + chunk);
  w.kend = w.k1 - 1;
  w.bt_row = a.block_table + int64_t(w.it.row) * a.max_blocks;
  w.num_tiles = (w.k1 - w.k0 + BN - 1) / BN;
  return true;
}

// The ring of STAGES shared-memory stages the K/V tiles stream through (cp.async, one
// commit group per tile). Stage s holds BN K rows then BN V rows of RS elements of KV,
// starting at base + s · stage_bytes. Lane l keeps the cache slots of the next tile to
// issue (tile_slots), looked up a tile ahead so the table's latency hides behind math.
//
// Early start (few-token steps): the first tiles are issued before the kernel waits on
// the one before it (pdl_wait). Every key a decode token sees was written by an earlier
// step, except its own (key p), which qkv_to_cache writes in this step: start_early()
// leaves that key out and load_held() copies it once the wait is over. The step's
// metadata (positions, starts, block table) is never written by a kernel of the step.
template <int DH, int BN, int RS, typename KV, int STAGES>
struct KvRing {
  static constexpr int kStageBytes = 2 * BN * RS * int(sizeof(KV));
  uint32_t base;
  int slots[(BN + 31) / 32];

  __device__ uint32_t k_stage(int s) const { return base + uint32_t(s * kStageBytes); }
  __device__ uint32_t v_stage(int s) const {
    return k_stage(s) + uint32_t(BN * RS * int(sizeof(KV)));
  }

  // Issues the first STAGES - 1 tiles (one commit group each, empty past the split).
  __device__ __forceinline__ void start(const AttnArgs& a, const DecodeWork& w) {
    start_tiles<false>(a, w);
  }

  // start() without the token's own key w.it.p (load_held copies it after pdl_wait).
  __device__ __forceinline__ void start_early(const AttnArgs& a, const DecodeWork& w) {
    start_tiles<true>(a, w);
  }

  template <bool kHold>
  __device__ __forceinline__ void start_tiles(const AttnArgs& a, const DecodeWork& w) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < w.num_tiles) {
        const int kt = w.k0 + s * BN;
        tile_slots(slots, w.bt_row, a, kt, w.kend);
        if constexpr (kHold) {
#pragma unroll
          for (int i = 0; i < int(sizeof(slots) / sizeof(int)); i++)
            if (kt + 32 * i + lane == w.it.p) slots[i] = kHeldSlot;
        }
        load_kv_stage<DH, BN, RS, KV, kHold>(k_stage(s), v_stage(s), a, w.kvh, slots);
      }
      cp_async_commit();
    }
    tile_slots(slots, w.bt_row, a, w.k0 + (STAGES - 1) * BN, w.kend);  // the next to issue
  }

  // Copies the key start_early() held back into its tile's stage (when that tile was one
  // of start's), in the caller's open commit group. Call after pdl_wait.
  __device__ __forceinline__ void load_held(const AttnArgs& a, const DecodeWork& w) const {
    constexpr int kChunksPerRow = DH * int(sizeof(KV)) / 16;
    const int j = w.it.p, t = (j - w.k0) / BN;
    if (j < w.k0 || j > w.kend || t >= STAGES - 1) return;
    const int slot = key_slot(w.bt_row, a, j, w.kend), r = j - w.k0 - t * BN;
    for (int c = threadIdx.x; c < kChunksPerRow; c += kThreads)
      copy_kv_chunk<RS, KV>(k_stage(t), v_stage(t), a, w.kvh, slot, r, c);
  }

  // Waits until tile t has landed for every thread (so tile t - 1's stage is free), then
  // issues tile t + STAGES - 1 into that stage. The whole CTA calls this.
  __device__ __forceinline__ void advance(const AttnArgs& a, const DecodeWork& w, int t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = t + STAGES - 1;
    if (next < w.num_tiles) {
      load_kv_stage<DH, BN, RS, KV>(k_stage(next % STAGES), v_stage(next % STAGES), a, w.kvh,
                                    slots);
      tile_slots(slots, w.bt_row, a, w.k0 + (next + 1) * BN, w.kend);  // used next time
    }
    cp_async_commit();  // possibly empty: keeps one group per tile
  }
};

// Counts this CTA's split in on its item's counter; true for the last of the item's
// `live` splits to arrive. Ordering (the pattern of cooperative groups' grid sync, with
// the fences folded into the atomic): the barrier orders every thread's partial stores
// before thread 0's atomic, whose release makes them visible GPU-wide with the count;
// the last CTA's acquire (same atomic) and the barrier after it order its threads'
// reads of the other splits' partials (through L2, merge_splits) after their stores.
// The last CTA sets the counter back to 0: every live split has arrived, so nothing
// else touches it in this launch. The whole CTA calls this.
__device__ __forceinline__ bool arrive_last(const SplitArgs& sp, int live) {
  __shared__ int s_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = sp.counters + (blockIdx.x * gridDim.y + blockIdx.y);
    const bool last = cuda::atomic_add_acq_rel(counter, 1) == live - 1;
    if (last) atomicExch(counter, 0);
    s_last = last;
  }
  __syncthreads();
  return s_last != 0;
}

constexpr int kMergeBatch = 16;  // partials a thread has in flight at once while merging

// Run by the item's last split: merges the `live` partials of each valid head into the
// bf16 output, out = Σ w_s·o_s / Σ w_s with w_s = l_s·2^(m_s − max), folded online. A
// thread owns 4 columns of one head; the loads of kMergeBatch splits are issued together,
// from L2 (ld.cg: never a stale L1 line).
template <int HEADS>
__device__ __forceinline__ void merge_splits(const AttnArgs& a, const SplitArgs& sp,
                                             const DecodeItem& it, int kvh, int h0, int live) {
  const int num_heads = min(HEADS, a.group - h0), quads = a.head_dim / 4;
  for (int id = threadIdx.x; id < num_heads * quads; id += kThreads) {
    const int row = id / quads, col = 4 * (id % quads), head = kvh * a.group + h0 + row;
    const int64_t base = (int64_t(blockIdx.x) * a.num_q_heads + head) * sp.num_splits;
    float mx = -INFINITY, sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < live; s0 += kMergeBatch) {
      float2 ml[kMergeBatch];
      float4 v[kMergeBatch];
#pragma unroll
      for (int u = 0; u < kMergeBatch; u++) {  // every load issued before the first use
        ml[u] = make_float2(-INFINITY, 0.f);
        v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (s0 + u < live) {
          const int64_t part = base + s0 + u;
          ml[u] = __ldcg(sp.part_ml + part);
          v[u] = __ldcg(reinterpret_cast<const float4*>(sp.part_o + part * a.head_dim + col));
        }
      }
#pragma unroll
      for (int u = 0; u < kMergeBatch; u++) {
        if (s0 + u >= live) break;
        const float mn = fmaxf(mx, ml[u].x), ref = mn == -INFINITY ? 0.f : mn;
        const float alpha = fast_exp2(mx - ref), w = ml[u].y * fast_exp2(ml[u].x - ref);
        acc = make_float4(acc.x * alpha + w * v[u].x, acc.y * alpha + w * v[u].y,
                          acc.z * alpha + w * v[u].z, acc.w * alpha + w * v[u].w);
        sum = sum * alpha + w;
        mx = mn;
      }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(
        a.out + (int64_t(it.token) * a.num_q_heads + head) * a.head_dim + col);
    dst[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    dst[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

// The last step of a CTA's merge: every key group has put its scaled O into `red`
// ([KW, ROWS, DH + 8] floats) and s_fin holds each head's (max, sum) over the groups.
// Writes the valid heads: the final bf16 output when `direct` (the item's keys fit this
// one split), else this split's partial (normalized output and (max, sum)).
template <int DH, int KW, int ROWS>
__device__ __forceinline__ void write_merged(const AttnArgs& a, const SplitArgs& sp,
                                             const DecodeItem& it, int kvh, int h0, int split,
                                             bool direct, const float* red, const float2* s_fin) {
  constexpr int MS = DH + 8, kPairs = DH / 2;
  const int num_heads = min(ROWS, a.group - h0);
  for (int id = threadIdx.x; id < num_heads * kPairs; id += kThreads) {
    const int row = id / kPairs, col = 2 * (id % kPairs);
    if (col >= a.head_dim) continue;
    float x = 0.f, y = 0.f;
#pragma unroll
    for (int k = 0; k < KW; k++) {
      const float2 v = *reinterpret_cast<const float2*>(red + (k * ROWS + row) * MS + col);
      x += v.x;
      y += v.y;
    }
    const float2 fin = s_fin[row];
    const float inv = fin.y > 0.f ? 1.f / fin.y : 0.f;
    const int head = kvh * a.group + h0 + row;
    if (direct) {
      bf16* dst = a.out + (int64_t(it.token) * a.num_q_heads + head) * a.head_dim + col;
      *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(x * inv, y * inv);
    } else {
      const int64_t part = (int64_t(blockIdx.x) * a.num_q_heads + head) * sp.num_splits + split;
      *reinterpret_cast<float2*>(sp.part_o + part * a.head_dim + col) =
          make_float2(x * inv, y * inv);
      if (col == 0) sp.part_ml[part] = fin;
    }
  }
}

using KernelFn = void (*)(AttnArgs, SplitArgs);

// `kernel` with its shared-memory limit set (once per device and kernel: a host call per
// launch is a fixed cost small steps notice). `ready` is the kernel's own flag word.
inline KernelFn prepared(KernelFn kernel, int smem_bytes, std::atomic<uint64_t>& ready) {
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes, ready,
                           "attention decode");
  return kernel;
}

// CTAs of `kernel` resident per SM (>= 1), cached in `cached` (the process's GPUs are
// assumed alike).
inline int resident_ctas(KernelFn kernel, int smem_bytes, std::atomic<int>& cached) {
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0) return n;
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem_bytes),
             "attention decode: cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  n = n > 0 ? n : 1;
  cached.store(n, std::memory_order_relaxed);
  return n;
}

// Grid (X, Hkv · head groups of HEADS, splits) of a decode kernel, launched.
inline void launch_grid(KernelFn kernel, int heads_per_cta, int smem_bytes, const AttnArgs& a,
                        const SplitArgs& sp, int num_x, cudaStream_t stream) {
  const int head_groups = (a.group + heads_per_cta - 1) / heads_per_cta;
  const dim3 grid(unsigned(num_x), unsigned(a.num_kv_heads * head_groups), unsigned(sp.num_splits));
  cuda::launch_pdl("attention decode kernel", kernel, grid, dim3(kThreads), size_t(smem_bytes),
                   stream, a, sp);
}

// f(std::integral_constant<int, DH>) for the compiled head dim DH that holds head_dim.
template <class F>
decltype(auto) with_head_dim(int head_dim, F&& f) {
  switch (padded_head_dim(head_dim)) {
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 96:
      return f(std::integral_constant<int, 96>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    case 256:
      return f(std::integral_constant<int, 256>{});
    case 512:
      return f(std::integral_constant<int, 512>{});
    default:
      cuda_fail("attention decode: head dim above 512");
  }
}

}  // namespace tandem::attn::decode
