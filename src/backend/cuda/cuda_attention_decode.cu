// Decode attention (one query token per row): flash-decoding on mma.sync tensor cores.
//
// A CTA computes one token's query heads that share a kv head (up to 16 of them, the
// mma's M; bigger GQA groups take several CTAs) over one split of the token's visible
// keys. K/V tiles of BN keys stream through a cp.async ring of kStages buffers. The 4
// warps form KW key groups of DW = 4 / KW warps: within a tile, key group kw owns keys
// [kw·BN/KW, (kw+1)·BN/KW) and keeps its own running (max, sum) and O accumulator; its
// DW warps split the head dim of P·V (and each computes the group's scores). After the
// loop the key groups merge (m, l, O) through shared memory (the K/V stages, free by
// then). Head dims <= 128 use KW = 4 (every warp its own keys), 256 KW = 2, 512 KW = 1.
//
// Addresses: each lane looks up the cache slot of one key per 32 (block table read once
// per key, one tile ahead so its latency hides behind the previous tile's math), and the
// threads copying a key's 16-byte chunks fetch its slot with a shuffle. The first tiles'
// block-table lines are prefetched at kernel start, before the token's position arrives.
//
// An e4m3 cache streams through the same ring as bytes (half the traffic) and the warps
// widen it in registers as they read it (cuda_attention_f8.cuh: f16 mma, even/odd output
// column tiles), so the loop is the bf16 one with other fragment loads.
//
// Splits: the host fixes the split count from host integers only (graph-capturable); a
// CTA derives its key range from its token's real key count on the device (split_chunk),
// so a max_context_len that overstates the rows (a replayed graph's capacity) costs
// nothing. An item (token, kv head, head group) whose keys fit one split writes bf16
// directly. Otherwise each live split writes its normalized output and (max, sum), then
// counts itself in on the item's arrival counter (after a fence); the last to arrive
// merges the live partials into the bf16 output and sets the counter back to 0, so no
// second kernel runs and the counters are zero again for the next launch or replay.
#include <atomic>
#include <type_traits>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_attention_f8.cuh"
#include "backend/cuda/cuda_backend.h"

namespace tandem::attn {

namespace {

template <int DH, typename KV = bf16>
struct DecodeShape {
  static constexpr int kKeyGroups = DH <= 128 ? 4 : DH == 256 ? 2 : 1;  // KW
  static constexpr int kDimWarps = 4 / kKeyGroups;                      // DW
  static constexpr int kBlockN = DH <= 64 ? 128 : DH <= 128 ? 64 : DH == 256 ? 32 : 16;
  static constexpr int kGroupKeys = kBlockN / kKeyGroups;  // keys per key group and tile
  static constexpr int kStages = DH <= 256 ? 3 : 2;
  static constexpr int kStride = DH + 8;  // +16 B: conflict-free ldmatrix
  static constexpr bool kQInRegs = DH <= 256;
  static constexpr int kNV = DH / kDimWarps / 8;  // 8-column O tiles per warp
  static constexpr int kSlotRegs = (kBlockN + 31) / 32;
  static constexpr bool kF8 = sizeof(KV) == 1;
  static constexpr int kChunkElems = 16 / int(sizeof(KV));  // elements per 16-byte copy
  // A stage's row stride in elements; both pad by 16 bytes so the 8 rows of an ldmatrix
  // fall on distinct banks.
  static constexpr int kRawStride = kF8 ? DH + 16 : kStride;
  static constexpr int kStageBytes = 2 * kBlockN * kRawStride * int(sizeof(KV));  // K then V
  static constexpr int kSmemBytes = 16 * kStride * 2 + kStages * kStageBytes;
  static constexpr int kMergeStride = DH + 8;  // floats per merge row
  static_assert(kGroupKeys % 16 == 0, "a key group covers whole mma k-steps");
  static_assert(kBlockN * (DH / kChunkElems) % kThreads == 0,
                "tile copies split evenly over threads");
  static_assert(kKeyGroups * 16 * kMergeStride * 4 <= kStages * kStageBytes,
                "the merge buffer fits in the K/V stages");
};

// The token a decode CTA serves and the keys it sees: [lo, p] of row `row`.
struct DecodeItem {
  int token, row, p, lo;
};

// Row b owns tokens [starts[b], starts[b+1]); finds the row of token t by bisection.
__device__ __forceinline__ int row_of_token(const int32_t* starts, int num_rows, int t) {
  int lo = 0, hi = num_rows - 1;  // the last row starting at or before t
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (starts[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Grid x -> item: a row with exactly one token (by_row) or any token; false = nothing
// to compute. Independent loads are issued together, then `overlap()` runs while they
// are in flight: without by_row (T == B, so starts[x + 1] exists) one round trip finds
// the token's position and, in the usual one-token-per-row step, its row.
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
    const int p = __ldg(a.positions + x);
    const int s0 = __ldg(a.seq_starts + x), s1 = __ldg(a.seq_starts + x + 1);
    overlap();
    it.token = x;
    it.row = s0 <= x && x < s1 ? x : row_of_token(a.seq_starts, a.num_rows, x);
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
  const int last = min(a.block_shift >= 0 ? k1 >> a.block_shift : k1 / a.block_size,
                       a.max_blocks - 1);
  if (first > last) return;
  if (lane == 0 || first + 32 * (lane - 1) < last)
    prefetch_l1(a.block_table + int64_t(row) * a.max_blocks + min(first + 32 * lane, last));
}

// The 16 query heads [h0, h0 + 16) of kv head kvh (zeros past the group) into shared.
template <int DH>
__device__ __forceinline__ void load_q_heads(uint32_t dst, const AttnArgs& a, int token, int kvh,
                                             int h0) {
  constexpr int kChunksPerRow = DH / 8, kChunks = 16 * kChunksPerRow;
  const int num_heads = min(16, a.group - h0);
  for (int id = threadIdx.x; id < kChunks; id += kThreads) {
    const int r = id / kChunksPerRow, c = id % kChunksPerRow;
    const bool ok = r < num_heads && c * 8 < a.head_dim;
    const int64_t off =
        (int64_t(token) * a.num_q_heads + kvh * a.group + h0 + r) * a.head_dim + c * 8;
    cp_async_16(dst + uint32_t((r * (DH + 8) + c * 8) * 2), ok ? a.q + off : a.q, ok ? 16 : 0);
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

// Copies the K and V rows of a BN-key tile (slots from tile_slots) into one stage:
// consecutive threads take consecutive 16-byte chunks of a row (coalesced), and fetch
// the row's slot from the lane that looked it up. Invalid keys and columns past the
// head dim read as zeros (masked keys must hold finite values: probability 0 times V).
template <int DH, int BN, typename KV, int NSL>
__device__ __forceinline__ void load_kv_stage(uint32_t k_dst, uint32_t v_dst, const AttnArgs& a,
                                              int kvh, const int (&slots)[NSL]) {
  using Shape = DecodeShape<DH, KV>;
  constexpr int CE = Shape::kChunkElems, RS = Shape::kRawStride;
  constexpr int kChunksPerRow = DH / CE, kIters = BN * kChunksPerRow / kThreads;
  const KV* k = static_cast<const KV*>(a.k);
  const KV* v = static_cast<const KV*>(a.v);
#pragma unroll
  for (int it = 0; it < kIters; it++) {
    const int id = threadIdx.x + it * kThreads, r = id / kChunksPerRow, c = id % kChunksPerRow;
    int slot = __shfl_sync(0xffffffffu, slots[0], r & 31);
#pragma unroll
    for (int i = 1; i < NSL; i++) {
      const int x = __shfl_sync(0xffffffffu, slots[i], r & 31);
      if ((r >> 5) == i) slot = x;
    }
    const bool ok = slot >= 0 && c * CE < a.head_dim;
    const int64_t off = ok ? (int64_t(slot) * a.num_kv_heads + kvh) * a.head_dim + c * CE : 0;
    const uint32_t dst = uint32_t((r * RS + c * CE) * int(sizeof(KV)));
    cp_async_16(k_dst + dst, k + off, ok ? 16 : 0);
    cp_async_16(v_dst + dst, v + off, ok ? 16 : 0);
  }
}

// Merges the key groups' (m, l, O) and writes the valid heads: the final bf16 output
// when `direct` (the item's keys fit this one split), else this split's partial
// (normalized output and (max, sum)). `red` is free shared memory of [KW, 16, DH + 8]
// floats; the whole CTA calls this. PAIRED: o holds the e4m3 path's even/odd column
// tiles (cuda_attention_f8.cuh), else o[nv] covers columns 8·nv + 2c, +1.
template <int DH, bool PAIRED>
__device__ __forceinline__ void merge_and_store(const AttnArgs& a, const SplitArgs& sp,
                                                const DecodeItem& it, int kvh, int h0, int split,
                                                bool direct,
                                                const float (&o)[DecodeShape<DH>::kNV][4],
                                                const float (&m)[2], const float (&l)[2],
                                                float* red) {
  using Shape = DecodeShape<DH>;
  constexpr int KW = Shape::kKeyGroups, DW = Shape::kDimWarps, NV = Shape::kNV;
  constexpr int MS = Shape::kMergeStride;
  __shared__ float s_m[KW][16], s_l[KW][16];
  __shared__ float2 s_fin[16];  // per head row: (max, sum) over all key groups
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp / DW, dw = warp % DW;
  const int num_heads = min(16, a.group - h0);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);  // m[r] is already uniform over the quad
    if (dw == 0 && (lane & 3) == 0) {
      s_m[kw][(lane >> 2) + 8 * r] = m[r];
      s_l[kw][(lane >> 2) + 8 * r] = sum;
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = (lane >> 2) + 8 * r;
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < KW; k++) mx = fmaxf(mx, s_m[k][row]);
    const float base = mx == -INFINITY ? 0.f : mx;
    if (row < num_heads) {
      const float scale = fast_exp2(m[r] - base);  // 0 for a group that saw no key
      float* dst = red + (kw * 16 + row) * MS + dw * (DH / DW);
      if constexpr (PAIRED) {
#pragma unroll
        for (int j = 0; j < NV / 2; j++)
          *reinterpret_cast<float4*>(dst + 16 * j + 4 * (lane & 3)) =
              make_float4(o[2 * j][2 * r] * scale, o[2 * j + 1][2 * r] * scale,
                          o[2 * j][2 * r + 1] * scale, o[2 * j + 1][2 * r + 1] * scale);
      } else {
#pragma unroll
        for (int nv = 0; nv < NV; nv++)
          *reinterpret_cast<float2*>(dst + nv * 8 + 2 * (lane & 3)) =
              make_float2(o[nv][2 * r] * scale, o[nv][2 * r + 1] * scale);
      }
    }
    if (warp == 0 && (lane & 3) == 0) {
      float total = 0.f;
#pragma unroll
      for (int k = 0; k < KW; k++) total += s_l[k][row] * fast_exp2(s_m[k][row] - base);
      s_fin[row] = make_float2(mx, total);
    }
  }
  __syncthreads();
  constexpr int kPairs = DH / 2;
  for (int id = threadIdx.x; id < num_heads * kPairs; id += kThreads) {
    const int row = id / kPairs, col = 2 * (id % kPairs);
    if (col >= a.head_dim) continue;
    float x = 0.f, y = 0.f;
#pragma unroll
    for (int k = 0; k < KW; k++) {
      const float2 v = *reinterpret_cast<const float2*>(red + (k * 16 + row) * MS + col);
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

// atomicAdd with acquire-release semantics at GPU scope; returns the old value.
__device__ __forceinline__ int atomic_add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n"
               : "=r"(old)
               : "l"(p), "r"(v)
               : "memory");
  return old;
}

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
    const bool last = atomic_add_acq_rel(counter, 1) == live - 1;
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
__device__ __forceinline__ void merge_splits(const AttnArgs& a, const SplitArgs& sp,
                                             const DecodeItem& it, int kvh, int h0, int live) {
  const int num_heads = min(16, a.group - h0), quads = a.head_dim / 4;
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

// One CTA: one token, 16 query heads of one kv head, one split of the keys.
// grid = (X, Hkv · ceil(G / 16), num_splits).
template <int DH, typename KV>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, SplitArgs sp) {
  using Shape = DecodeShape<DH, KV>;
  constexpr int BN = Shape::kBlockN, ST = Shape::kStride, STAGES = Shape::kStages;
  constexpr int DW = Shape::kDimWarps, GK = Shape::kGroupKeys;
  constexpr int NV = Shape::kNV, NSL = Shape::kSlotRegs;
  constexpr bool kQInRegs = Shape::kQInRegs;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t q_base = smem_addr(smem_raw);
  const uint32_t kv_base = q_base + 16 * ST * 2;  // stage s: K at +2s·BN rows, V after it
  auto k_stage = [&](int s) { return kv_base + uint32_t(s * Shape::kStageBytes); };
  auto v_stage = [&](int s) { return k_stage(s) + uint32_t(BN * Shape::kRawStride * sizeof(KV)); };

  DecodeItem it;
  const auto prefetch = [&] {  // row guess: x
    prefetch_table<STAGES * BN>(a, blockIdx.x, blockIdx.z * kMinSplitKeys);
  };
  if (!find_item(a, sp.by_row, blockIdx.x, it, prefetch)) return;
  const int head_groups = (a.group + 15) / 16;
  const int kvh = blockIdx.y / head_groups, h0 = (blockIdx.y % head_groups) * 16;
  const int keys = it.p - it.lo + 1, chunk = split_chunk(sp.num_splits, keys);
  const int live = (keys + chunk - 1) / chunk;  // splits holding keys: 0 .. live - 1
  const int split = blockIdx.z, k0 = it.lo + split * chunk;
  if (split >= live) return;  // past the token's keys: not counted, not merged
  const int k1 = min(it.p + 1, k0 + chunk), kend = k1 - 1;
  const int32_t* bt_row = a.block_table + int64_t(it.row) * a.max_blocks;
  const int num_tiles = (k1 - k0 + BN - 1) / BN;

  load_q_heads<DH>(q_base, a, it.token, kvh, h0);
  cp_async_commit();
  int slots[NSL];
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < num_tiles) {
      tile_slots(slots, bt_row, a, k0 + s * BN, kend);
      load_kv_stage<DH, BN, KV>(k_stage(s), v_stage(s), a, kvh, slots);
    }
    cp_async_commit();
  }
  tile_slots(slots, bt_row, a, k0 + (STAGES - 1) * BN, kend);  // the next tile to issue

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp / DW, dw = warp % DW;
  constexpr int RS = Shape::kRawStride, ES = int(sizeof(KV));  // stage row: RS·ES bytes
  const uint32_t q_lane = q_base + a_lane_offset(lane, ST);
  const bf16* q_smem = reinterpret_cast<const bf16*>(smem_raw);
  const uint32_t k_lane = (Shape::kF8 ? k_lane_offset_f8(lane, RS) : k_lane_offset(lane, ST)) +
                          uint32_t(kw * GK * RS * ES);
  const uint32_t v_lane = (Shape::kF8 ? v_lane_offset_f8(lane, RS) : v_lane_offset(lane, ST)) +
                          uint32_t((kw * GK * RS + dw * (DH / DW)) * ES);
  const int lo[2] = {k0, k0}, hi[2] = {kend, kend};
  uint32_t qf[kQInRegs ? DH / 16 : 1][4];
  float o[NV][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;
  cp_async_wait<STAGES - 1>();  // Q landed
  __syncthreads();
  if constexpr (kQInRegs && Shape::kF8)
    load_q_frags_f8<DH, ST>(qf, q_smem, lane);
  else if constexpr (kQInRegs)
    load_q_frags<DH>(qf, q_lane);

  for (int t = 0; t < num_tiles; t++) {
    cp_async_wait<STAGES - 2>();  // tile t landed
    __syncthreads();              // ... for every thread; tile t-1's stage is free
    const int next = t + STAGES - 1;
    if (next < num_tiles) {
      load_kv_stage<DH, BN, KV>(k_stage(next % STAGES), v_stage(next % STAGES), a, kvh, slots);
      tile_slots(slots, bt_row, a, k0 + (next + 1) * BN, kend);  // used next iteration
    }
    cp_async_commit();  // possibly empty: keeps one group per tile
    const int stage = t % STAGES, kg = k0 + t * BN + kw * GK;  // the group's first key
    const uint32_t k_tile = k_stage(stage), v_tile = v_stage(stage);
    if (kg <= kend) {  // warp-uniform; a group wholly past the split has nothing to add
      float s[GK / 8][4];
      if constexpr (Shape::kF8)
        warp_qk_f8<DH, GK, RS, ST, kQInRegs>(s, qf, q_smem, k_tile + k_lane, lane);
      else
        warp_qk<DH, GK, ST, kQInRegs>(s, qf, q_lane, k_tile + k_lane);
      score_tile<GK>(s, a, kg, lo, hi, kg + GK > k1, lane);
      online_softmax<GK, NV>(s, o, m, l);
      if constexpr (Shape::kF8)
        warp_pv_f8<GK, NV, RS>(o, s, v_tile + v_lane);
      else
        warp_pv<GK, NV, ST>(o, s, v_tile + v_lane);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: they become the merge buffer
  merge_and_store<DH, Shape::kF8>(a, sp, it, kvh, h0, split, live == 1, o, m, l,
                      reinterpret_cast<float*>(smem_raw + 16 * ST * 2));
  if (live > 1 && arrive_last(sp, live)) merge_splits(a, sp, it, kvh, h0, live);
}

// Sets the kernel's shared-memory limit (once per device: a host call per launch is a
// fixed cost small steps notice); returns the kernel.
template <int DH, typename KV>
auto prepared_kernel() {
  static std::atomic<uint64_t> ready{0};  // bit d: the limit is set on device d
  auto kernel = decode_kernel<DH, KV>;
  int device = 0;
  cuda_check(cudaGetDevice(&device), "attention decode: cudaGetDevice");
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (ready.load(std::memory_order_relaxed) & bit) != 0) return kernel;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  DecodeShape<DH, KV>::kSmemBytes),
             "attention decode: cudaFuncSetAttribute");
  ready.fetch_or(bit, std::memory_order_relaxed);
  return kernel;
}

template <int DH, typename KV>
void launch(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream) {
  auto kernel = prepared_kernel<DH, KV>();
  const int head_groups = (a.group + 15) / 16;
  const dim3 grid(unsigned(num_x), unsigned(a.num_kv_heads * head_groups), unsigned(sp.num_splits));
  kernel<<<grid, kThreads, DecodeShape<DH, KV>::kSmemBytes, stream>>>(a, sp);
  TANDEM_CUDA_LAUNCHED("attention decode kernel");
}

template <int DH, typename KV>
int ctas_per_sm() {
  static std::atomic<int> cached{0};  // the process's GPUs are assumed alike
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0) return n;
  auto kernel = prepared_kernel<DH, KV>();
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads,
                                                           DecodeShape<DH, KV>::kSmemBytes),
             "attention decode: cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  n = n > 0 ? n : 1;
  cached.store(n, std::memory_order_relaxed);
  return n;
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

}  // namespace

int decode_ctas_per_sm(int head_dim, bool kv_f8) {
  return with_head_dim(head_dim, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    return kv_f8 ? ctas_per_sm<DH, uint8_t>() : ctas_per_sm<DH, bf16>();
  });
}

void launch_decode(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream) {
  cuda_require(sp.num_splits >= 1 && sp.num_splits <= kMaxSplits,
               "attention decode: bad split plan");
  cuda_require(sp.num_splits == 1 || (sp.part_o && sp.part_ml && sp.counters),
               "attention decode: split partials need a workspace and arrival counters");
  // Slots (block · block_size + offset) are 32-bit.
  cuda_require(int64_t(a.num_blocks) * a.block_size <= INT32_MAX,
               "attention decode: KV pool above 2^31 slots");
  if (num_x <= 0) return;
  with_head_dim(a.head_dim, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    if (a.kv_f8)
      launch<DH, uint8_t>(a, sp, num_x, stream);
    else
      launch<DH, bf16>(a, sp, num_x, stream);
  });
}

}  // namespace tandem::attn
