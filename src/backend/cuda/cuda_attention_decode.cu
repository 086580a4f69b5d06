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
// An e4m3 cache has its own kernel (cuda_attention_decode_f8.cu); what the two share —
// finding the token, slots, the tile ring, the split merge — is in cuda_attention_decode.cuh.
//
// Splits: the host fixes the split count from host integers only (graph-capturable); a
// CTA derives its key range from its token's real key count on the device (split_chunk),
// so a max_context_len that overstates the rows (a replayed graph's capacity) costs
// nothing. An item (token, kv head, head group) whose keys fit one split writes bf16
// directly. Otherwise each live split writes its normalized output and (max, sum), then
// counts itself in on the item's arrival counter (after a fence); the last to arrive
// merges the live partials into the bf16 output and sets the counter back to 0, so no
// second kernel runs and the counters are zero again for the next launch or replay.
#include "backend/cuda/cuda_attention_decode.cuh"

namespace tandem::attn {

namespace {

using namespace decode;

template <int DH>
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
  static constexpr int kStageBytes = 2 * kBlockN * kStride * 2;  // K then V
  static constexpr int kSmemBytes = 16 * kStride * 2 + kStages * kStageBytes;
  static constexpr int kMergeStride = DH + 8;  // floats per merge row
  static_assert(kGroupKeys % 16 == 0, "a key group covers whole mma k-steps");
  static_assert(kBlockN * (DH / 8) % kThreads == 0, "tile copies split evenly over threads");
  static_assert(kKeyGroups * 16 * kMergeStride * 4 <= kStages * kStageBytes,
                "the merge buffer fits in the K/V stages");
};

// Merges the key groups' (m, l, O) and writes the valid heads (write_merged). `red` is
// free shared memory of [KW, 16, DH + 8] floats; the whole CTA calls this.
template <int DH>
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
#pragma unroll
      for (int nv = 0; nv < NV; nv++)
        *reinterpret_cast<float2*>(dst + nv * 8 + 2 * (lane & 3)) =
            make_float2(o[nv][2 * r] * scale, o[nv][2 * r + 1] * scale);
    }
    if (warp == 0 && (lane & 3) == 0) {
      float total = 0.f;
#pragma unroll
      for (int k = 0; k < KW; k++) total += s_l[k][row] * fast_exp2(s_m[k][row] - base);
      s_fin[row] = make_float2(mx, total);
    }
  }
  __syncthreads();
  write_merged<DH, KW, 16>(a, sp, it, kvh, h0, split, direct, red, s_fin);
}

// One CTA: one token, 16 query heads of one kv head, one split of the keys.
// grid = (X, Hkv · ceil(G / 16), num_splits).
template <int DH>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, SplitArgs sp) {
  using Shape = DecodeShape<DH>;
  constexpr int BN = Shape::kBlockN, ST = Shape::kStride, STAGES = Shape::kStages;
  constexpr int DW = Shape::kDimWarps, GK = Shape::kGroupKeys;
  constexpr int NV = Shape::kNV, NSL = Shape::kSlotRegs;
  constexpr bool kQInRegs = Shape::kQInRegs;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t q_base = smem_addr(smem_raw);
  const uint32_t kv_base = q_base + 16 * ST * 2;  // stage s: K at +2s·BN rows, V after it
  auto k_stage = [&](int s) { return kv_base + uint32_t(s * Shape::kStageBytes); };
  auto v_stage = [&](int s) { return k_stage(s) + uint32_t(BN * ST * 2); };

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

  load_q_heads<DH, 16, ST>(q_base, a, it.token, kvh, h0);
  cp_async_commit();
  int slots[NSL];
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < num_tiles) {
      tile_slots(slots, bt_row, a, k0 + s * BN, kend);
      load_kv_stage<DH, BN, ST, bf16>(k_stage(s), v_stage(s), a, kvh, slots);
    }
    cp_async_commit();
  }
  tile_slots(slots, bt_row, a, k0 + (STAGES - 1) * BN, kend);  // the next tile to issue

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp / DW, dw = warp % DW;
  const uint32_t q_lane = q_base + a_lane_offset(lane, ST);
  const uint32_t k_lane = k_lane_offset(lane, ST) + uint32_t(kw * GK * ST * 2);
  const uint32_t v_lane = v_lane_offset(lane, ST) + uint32_t((kw * GK * ST + dw * (DH / DW)) * 2);
  const int lo[2] = {k0, k0}, hi[2] = {kend, kend};
  uint32_t qf[kQInRegs ? DH / 16 : 1][4];
  float o[NV][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;
  cp_async_wait<STAGES - 1>();  // Q landed
  __syncthreads();
  if constexpr (kQInRegs) load_q_frags<DH>(qf, q_lane);

  for (int t = 0; t < num_tiles; t++) {
    cp_async_wait<STAGES - 2>();  // tile t landed
    __syncthreads();              // ... for every thread; tile t-1's stage is free
    const int next = t + STAGES - 1;
    if (next < num_tiles) {
      load_kv_stage<DH, BN, ST, bf16>(k_stage(next % STAGES), v_stage(next % STAGES), a, kvh,
                                      slots);
      tile_slots(slots, bt_row, a, k0 + (next + 1) * BN, kend);  // used next iteration
    }
    cp_async_commit();  // possibly empty: keeps one group per tile
    const int stage = t % STAGES, kg = k0 + t * BN + kw * GK;  // the group's first key
    if (kg <= kend) {  // warp-uniform; a group wholly past the split has nothing to add
      float s[GK / 8][4];
      warp_qk<DH, GK, ST, kQInRegs>(s, qf, q_lane, k_stage(stage) + k_lane);
      score_tile<GK>(s, a, kg, lo, hi, kg + GK > k1, lane);
      online_softmax<GK, NV>(s, o, m, l);
      warp_pv<GK, NV, ST>(o, s, v_stage(stage) + v_lane);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: they become the merge buffer
  merge_and_store<DH>(a, sp, it, kvh, h0, split, live == 1, o, m, l,
                      reinterpret_cast<float*>(smem_raw + 16 * ST * 2));
  if (live > 1 && arrive_last(sp, live)) merge_splits<16>(a, sp, it, kvh, h0, live);
}

template <int DH>
KernelFn kernel() {
  static std::atomic<uint64_t> ready{0};
  return prepared(decode_kernel<DH>, DecodeShape<DH>::kSmemBytes, ready);
}

}  // namespace

int decode_heads_per_cta(bool kv_f8) {
  return kv_f8 ? decode_f8_heads_per_cta() : 16;
}

int decode_ctas_per_sm(int head_dim, bool kv_f8) {
  if (kv_f8) return decode_f8_ctas_per_sm(head_dim);
  return with_head_dim(head_dim, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    static std::atomic<int> cached{0};
    return resident_ctas(kernel<DH>(), DecodeShape<DH>::kSmemBytes, cached);
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
  if (a.kv_f8) return launch_decode_f8(a, sp, num_x, stream);
  with_head_dim(a.head_dim, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    launch_grid(kernel<DH>(), 16, DecodeShape<DH>::kSmemBytes, a, sp, num_x, stream);
  });
}

}  // namespace tandem::attn
