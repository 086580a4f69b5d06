// Decode attention over an e4m3 KV cache: the flash-decoding kernel of
// cuda_attention_decode.cu (same CTA work split, tile ring, splits and merge; see there)
// with its products transposed and the cache widened in registers (cuda_attention_f8.cuh).
//
// A CTA computes up to 8 query heads that share a kv head (the mma's N) over one split of
// one token's keys. The e4m3 stages are half the bytes of bf16 ones and the accumulators
// half the registers, so 4 CTAs fit an SM (3 for bf16 at Dh 128): Q sits in the last
// stage until its fragments are in registers, before that stage's first tile is issued.
#include "backend/cuda/cuda_attention_decode.cuh"
#include "backend/cuda/cuda_attention_f8.cuh"

namespace tandem::attn {

namespace {

using namespace decode;

constexpr int kHeads = 8;  // query heads per CTA: the mma's N

template <int DH>
struct F8Shape : Tiling<DH> {
  using T = Tiling<DH>;
  static constexpr int kRowBytes = DH + 16;  // RS: a stage row, padded (ldmatrix banks)
  static constexpr int kQStride = DH + 8;    // Q rows in shared memory, bf16 elements
  static constexpr int kMT = DH / T::kDimWarps / 16;              // 16-dim Oᵀ tiles per warp
  static constexpr int kStageBytes = 2 * T::kBlockN * kRowBytes;  // K then V
  static constexpr int kQBytes = kHeads * kQStride * 2;
  // Q in registers: Q lands in the last stage; else Q keeps its own region in front.
  static constexpr int kQRegion = T::kQInRegs ? 0 : kQBytes;
  static constexpr int kQOffset = T::kQInRegs ? (T::kStages - 1) * kStageBytes : 0;
  static constexpr int kSmemBytes = kQRegion + T::kStages * kStageBytes;
  static_assert(T::kBlockN * (DH / 16) % kThreads == 0, "tile copies split evenly over threads");
  static_assert(kQBytes <= kStageBytes, "Q fits one stage");
  static_assert(T::kKeyGroups * kHeads * T::kMergeStride * 4 <= T::kStages * kStageBytes,
                "the merge buffer fits in the K/V stages");
};

// Scores of a Sᵀ tile in log2 units (scale, softcap); keys outside [lo, hi] -> -inf.
// kt is the key of the tile's row 0.
template <int GK>
__device__ __forceinline__ void score_tile_t(float (&s)[GK / 16][4], const AttnArgs& a, int kt,
                                             int lo, int hi, bool masked, int lane) {
  const bool cap = a.cap_log2 > 0.f;
#pragma unroll
  for (int mt = 0; mt < GK / 16; mt++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      float x = s[mt][e] * a.qk_mul;
      if (cap) x = a.cap_log2 * softcap_tanh(x);
      if (masked) {
        const int j = kt + mt * 16 + (lane >> 2) + 8 * (e >> 1);
        if (j < lo || j > hi) x = -INFINITY;
      }
      s[mt][e] = x;
    }
  }
}

// Online softmax over a Sᵀ tile: lane 4g + c keeps heads 2c (h = 0) and 2c + 1 (h = 1);
// the max is reduced over the 8 lanes of a head (xor 4, 8, 16), the sum stays lane-partial.
template <int GK, int MT>
__device__ __forceinline__ void online_softmax_t(float (&s)[GK / 16][4], float (&o)[MT][4],
                                                 float (&m)[2], float (&l)[2]) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float mx = m[h];
#pragma unroll
    for (int mt = 0; mt < GK / 16; mt++) mx = fmaxf(mx, fmaxf(s[mt][h], s[mt][2 + h]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float base = mx == -INFINITY ? 0.f : mx;
    const float alpha = fast_exp2(m[h] - base);
    m[h] = mx;
    float sum = 0.f;
#pragma unroll
    for (int mt = 0; mt < GK / 16; mt++) {
      s[mt][h] = fast_exp2(s[mt][h] - base);
      s[mt][2 + h] = fast_exp2(s[mt][2 + h] - base);
      sum += s[mt][h] + s[mt][2 + h];
    }
    l[h] = l[h] * alpha + sum;
#pragma unroll
    for (int j = 0; j < MT; j++) {
      o[j][h] *= alpha;
      o[j][2 + h] *= alpha;
    }
  }
}

// Merges the key groups' (m, l, Oᵀ) and writes the valid heads (write_merged). `red` is
// free shared memory of [KW, 8, DH + 8] floats; the whole CTA calls this.
template <int DH>
__device__ __forceinline__ void merge_and_store_t(const AttnArgs& a, const SplitArgs& sp,
                                                  const DecodeItem& it, int kvh, int h0, int split,
                                                  bool direct,
                                                  const float (&o)[F8Shape<DH>::kMT][4],
                                                  const float (&m)[2], const float (&l)[2],
                                                  float* red) {
  using Shape = F8Shape<DH>;
  constexpr int KW = Shape::kKeyGroups, DW = Shape::kDimWarps, MT = Shape::kMT;
  constexpr int MS = Shape::kMergeStride;
  __shared__ float s_m[KW][kHeads], s_l[KW][kHeads];
  __shared__ float2 s_fin[kHeads];  // per head: (max, sum) over all key groups
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp / DW, dw = warp % DW;
  const int g = lane >> 2, c = lane & 3, num_heads = min(kHeads, a.group - h0);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = l[h];  // m[h] is already uniform over the head's lanes
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    sum += __shfl_xor_sync(0xffffffffu, sum, 8);
    sum += __shfl_xor_sync(0xffffffffu, sum, 16);
    if (dw == 0 && g == 0) {
      s_m[kw][2 * c + h] = m[h];
      s_l[kw][2 * c + h] = sum;
    }
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int head = 2 * c + h;
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < KW; k++) mx = fmaxf(mx, s_m[k][head]);
    const float base = mx == -INFINITY ? 0.f : mx;
    if (head < num_heads) {
      const float scale = fast_exp2(m[h] - base);  // 0 for a group that saw no key
      float* dst = red + (kw * kHeads + head) * MS + dw * (DH / DW) + 2 * g;
#pragma unroll
      for (int j = 0; j < MT; j++)
        *reinterpret_cast<float2*>(dst + 16 * j) =
            make_float2(o[j][h] * scale, o[j][2 + h] * scale);  // dims 16j + 2g, + 1
    }
    if (warp == 0 && g == 0) {
      float total = 0.f;
#pragma unroll
      for (int k = 0; k < KW; k++) total += s_l[k][head] * fast_exp2(s_m[k][head] - base);
      s_fin[head] = make_float2(mx, total);
    }
  }
  __syncthreads();
  write_merged<DH, KW, kHeads>(a, sp, it, kvh, h0, split, direct, red, s_fin);
}

// One CTA: one token, 8 query heads of one kv head, one split of the keys.
// grid = (X, Hkv · ceil(G / 8), num_splits).
template <int DH>
__global__ void __launch_bounds__(kThreads, 4) decode_f8_kernel(AttnArgs a, SplitArgs sp) {
  using Shape = F8Shape<DH>;
  constexpr int BN = Shape::kBlockN, RS = Shape::kRowBytes, QS = Shape::kQStride;
  constexpr int STAGES = Shape::kStages, DW = Shape::kDimWarps, GK = Shape::kGroupKeys;
  constexpr int MT = Shape::kMT;
  constexpr bool kQInRegs = Shape::kQInRegs;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = smem_addr(smem_raw);
  const bf16* q_smem = reinterpret_cast<const bf16*>(smem_raw + Shape::kQOffset);
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  DecodeWork w;
  if (!find_work<kHeads, BN, STAGES>(a, sp, w)) return;

  load_q_heads<DH, kHeads, QS>(base + Shape::kQOffset, a, w.it.token, w.kvh, w.h0);
  cp_async_commit();
  KvRing<DH, BN, RS, uint8_t, STAGES> ring{base + Shape::kQRegion};
  static_assert(decltype(ring)::kStageBytes == Shape::kStageBytes, "one stage layout");
  ring.start(a, w);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp / DW, dw = warp % DW;
  const uint32_t k_lane = lane_offset_f8(lane, RS) + uint32_t(kw * GK * RS);
  const uint32_t v_lane = lane_offset_f8(lane, RS) + uint32_t(kw * GK * RS + dw * (DH / DW));
  uint32_t qf[kQInRegs ? DH / 16 : 1][2];
  float o[MT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < MT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  cp_async_wait<STAGES - 1>();  // Q landed
  __syncthreads();
  if constexpr (kQInRegs) {
#pragma unroll
    for (int ks = 0; ks < DH / 16; ks++) q_frag_f8<QS>(qf[ks], q_smem, ks, lane);
  }

  for (int t = 0; t < w.num_tiles; t++) {
    ring.advance(a, w, t);  // at t = 0 this also frees Q's stage: the fragments are loaded
    const int stage = t % STAGES, kg = w.k0 + t * BN + kw * GK;  // the group's first key
    if (kg <= w.kend) {  // warp-uniform; a group wholly past the split has nothing to add
      float s[GK / 16][4];
      warp_kq_f8<DH, GK, RS, QS, kQInRegs>(s, qf, q_smem, ring.k_stage(stage) + k_lane, lane);
      score_tile_t<GK>(s, a, kg, w.k0, w.kend, kg + GK > w.k1, lane);
      online_softmax_t<GK, MT>(s, o, m, l);
      warp_vp_f8<GK, MT, RS>(o, s, ring.v_stage(stage) + v_lane);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: they become the merge buffer
  merge_and_store_t<DH>(a, sp, w.it, w.kvh, w.h0, w.split, w.live == 1, o, m, l,
                        reinterpret_cast<float*>(smem_raw + Shape::kQRegion));
  if (w.live > 1 && arrive_last(sp, w.live)) merge_splits<kHeads>(a, sp, w.it, w.kvh, w.h0, w.live);
}

template <int DH>
KernelFn kernel() {
  static std::atomic<uint64_t> ready{0};
  return prepared(decode_f8_kernel<DH>, F8Shape<DH>::kSmemBytes, ready);
}

}  // namespace

int decode_f8_heads_per_cta() {
  return kHeads;
}

int decode_f8_ctas_per_sm(int head_dim) {
  return with_head_dim(head_dim, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    static std::atomic<int> cached{0};
    return resident_ctas(kernel<DH>(), F8Shape<DH>::kSmemBytes, cached);
  });
}

void launch_decode_f8(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream) {
  with_head_dim(a.head_dim, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    launch_grid(kernel<DH>(), kHeads, F8Shape<DH>::kSmemBytes, a, sp, num_x, stream);
  });
}

}  // namespace tandem::attn
