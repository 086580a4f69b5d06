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
// Steps of one or two tokens, one per row (batch-1 and batch-2 decoding), take a variant
// built for latency (kFewTokens below): a 2-stage ring, small enough to share an SM with a
// few-row GEMV's CTA, and the keys of earlier steps loaded before the kernel waits on
// qkv_to_cache (PDL), the step's own key after (KvRing::start_early / load_held).
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

// STAGES: the ring's depth; Tiling's by default, 2 for steps of a few tokens (kFewTokens).
template <int DH, int STAGES = Tiling<DH>::kStages>
struct DecodeShape : Tiling<DH> {
  using T = Tiling<DH>;
  static constexpr int kStages = STAGES;
  static constexpr int kStride = DH + 8;             // +16 B: conflict-free ldmatrix
  static constexpr int kNV = DH / T::kDimWarps / 8;  // 8-column O tiles per warp
  static constexpr int kStageBytes = 2 * T::kBlockN * kStride * 2;  // K then V
  static constexpr int kSmemBytes = 16 * kStride * 2 + kStages * kStageBytes;
  static_assert(T::kBlockN * (DH / 8) % kThreads == 0, "tile copies split evenly over threads");
  static_assert(T::kKeyGroups * 16 * T::kMergeStride * 4 <= kStages * kStageBytes,
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
// grid = (X, Hkv · ceil(G / 16), num_splits). kEarly: the keys of earlier steps start
// loading before the wait on the kernel before (KvRing::start_early).
template <int DH, int STAGES_, bool kEarly>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, SplitArgs sp) {
  using Shape = DecodeShape<DH, STAGES_>;
  constexpr int BN = Shape::kBlockN, ST = Shape::kStride, STAGES = Shape::kStages;
  constexpr int DW = Shape::kDimWarps, GK = Shape::kGroupKeys, NV = Shape::kNV;
  constexpr bool kQInRegs = Shape::kQInRegs;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t q_base = smem_addr(smem_raw);
  cuda::pdl_launch_next();
  if constexpr (!kEarly) cuda::pdl_wait();
  DecodeWork w;  // from the step's metadata
  if (!find_work<16, BN, STAGES>(a, sp, w)) {
    if constexpr (kEarly) cuda::pdl_wait();
    return;
  }
  KvRing<DH, BN, ST, bf16, STAGES> ring{q_base + 16 * ST * 2};  // the stages follow Q
  static_assert(decltype(ring)::kStageBytes == Shape::kStageBytes, "one stage layout");
  if constexpr (kEarly) {
    ring.start_early(a, w);  // keys of earlier steps, while qkv_to_cache runs
    cuda::pdl_wait();        // q and the token's own key are qkv_to_cache's
    load_q_heads<DH, 16, ST>(q_base, a, w.it.token, w.kvh, w.h0);
    ring.load_held(a, w);
    cp_async_commit();
  } else {
    load_q_heads<DH, 16, ST>(q_base, a, w.it.token, w.kvh, w.h0);
    cp_async_commit();
    ring.start(a, w);
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp / DW, dw = warp % DW;
  const uint32_t q_lane = q_base + a_lane_offset(lane, ST);
  const uint32_t k_lane = k_lane_offset(lane, ST) + uint32_t(kw * GK * ST * 2);
  const uint32_t v_lane = v_lane_offset(lane, ST) + uint32_t((kw * GK * ST + dw * (DH / DW)) * 2);
  const int lo[2] = {w.k0, w.k0}, hi[2] = {w.kend, w.kend};
  uint32_t qf[kQInRegs ? DH / 16 : 1][4];
  float o[NV][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;
  cp_async_wait<kEarly ? 0 : STAGES - 1>();  // Q landed (early: with start's tiles)
  __syncthreads();
  if constexpr (kQInRegs) load_q_frags<DH>(qf, q_lane);

  for (int t = 0; t < w.num_tiles; t++) {
    ring.advance(a, w, t);
    const int stage = t % STAGES, kg = w.k0 + t * BN + kw * GK;  // the group's first key
    if (kg <= w.kend) {  // warp-uniform; a group wholly past the split has nothing to add
      float s[GK / 8][4];
      warp_qk<DH, GK, ST, kQInRegs>(s, qf, q_lane, ring.k_stage(stage) + k_lane);
      score_tile<GK>(s, a, kg, lo, hi, kg + GK > w.k1, lane);
      online_softmax<GK, NV>(s, o, m, l);
      warp_pv<GK, NV, ST>(o, s, ring.v_stage(stage) + v_lane);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: they become the merge buffer
  merge_and_store<DH>(a, sp, w.it, w.kvh, w.h0, w.split, w.live == 1, o, m, l,
                      reinterpret_cast<float*>(smem_raw + 16 * ST * 2));
  if (w.live > 1 && arrive_last(sp, w.live)) merge_splits<16>(a, sp, w.it, w.kvh, w.h0, w.live);
}

template <int DH, int STAGES = Tiling<DH>::kStages, bool kEarly = false>
KernelFn kernel() {
  static std::atomic<uint64_t> ready{0};
  return prepared(decode_kernel<DH, STAGES, kEarly>, DecodeShape<DH, STAGES>::kSmemBytes, ready);
}

// Steps of up to this many tokens take the few-token kernel, which is about latency:
// - a 2-stage ring: 72 KB at Dh 128 instead of 106, so a decode-attention CTA fits on an
//   SM beside a few-row GEMV's CTA (152 KB, cuda_gemv.cu). The attention's CTAs then
//   start while the qkv linear still streams, and the o projection's CTAs start on every
//   SM at once instead of late on the SMs attention held. A step this small has a tile
//   or two per split.
// - early keys (kEarly): its keys load while qkv_to_cache runs.
// Larger steps keep the deeper ring, and wait before they load anything.
constexpr int kFewTokens = 2;

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
    // Early keys assume the token's own key is the step's only one: rows of one token.
    const bool one_per_row = sp.by_row || a.num_tokens == a.num_rows;
    if (num_x <= kFewTokens && one_per_row)
      launch_grid(kernel<DH, 2, true>(), 16, DecodeShape<DH, 2>::kSmemBytes, a, sp, num_x, stream);
    else
      launch_grid(kernel<DH>(), 16, DecodeShape<DH>::kSmemBytes, a, sp, num_x, stream);
  });
}

}  // namespace tandem::attn
