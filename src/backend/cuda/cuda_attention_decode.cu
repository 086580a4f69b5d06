// Decode attention (one query token per row): flash-decoding on mma.sync tensor cores.
//
// A CTA computes one token's query heads that share a kv head (up to 16 of them, the
// mma's M; bigger GQA groups take several CTAs) over one split of the token's visible
// keys. K/V tiles stream through a cp.async ring of kStages buffers; every warp computes
// the same scores for the whole tile (cheap: decode is bound by reading K/V) and
// accumulates P·V for its quarter of the head dim, so warps never combine. With more
// than one split, each split writes its normalized output and (max, sum), and
// combine_kernel merges the splits that hold keys.
//
// The split count and grid come from host integers only (graph-capturable): split s of
// a token covers keys [lo + s·chunk, lo + (s+1)·chunk) ∩ [lo, p], the last split also
// everything past it, so an understated max_context_len costs speed, never keys.
#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_backend.h"

namespace tandem::attn {

namespace {

template <int DH>
struct DecodeShape {
  static constexpr int kBlockN = DH <= 128 ? 64 : 8192 / DH;  // ~32 KB of K+V per stage
  static constexpr int kStages = DH <= 256 ? 3 : 2;
  static constexpr int kStride = DH + 8;  // +16 B: conflict-free ldmatrix
  static constexpr bool kQInRegs = DH <= 256;
  static constexpr int kSmemBytes = (16 + kStages * 2 * kBlockN) * kStride * 2;
};

// The token a decode CTA serves and the keys it sees: [lo, p] of row `row`.
struct DecodeItem {
  int token, row, p, lo;
};

// Row b owns tokens [starts[b], starts[b+1]); finds the row of token t.
__device__ __forceinline__ int row_of_token(const int32_t* starts, int num_rows, int t) {
  if (t < num_rows && starts[t] <= t && t < starts[t + 1]) return t;  // one token per row
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
// to compute.
__device__ __forceinline__ bool find_item(const AttnArgs& a, bool by_row, int x, DecodeItem& it) {
  if (by_row) {
    it.row = x;
    it.token = a.seq_starts[x];
    if (a.seq_starts[x + 1] - it.token != 1) return false;
  } else {
    it.token = x;
    it.row = row_of_token(a.seq_starts, a.num_rows, x);
  }
  it.p = a.positions[it.token];
  it.lo = first_key(it.p, a.window);
  return it.p >= 0;  // a negative position sees no key (outside the contract)
}

// Splits of an item that hold keys (the same rule the decode kernel splits by).
__device__ __forceinline__ int live_splits(const SplitArgs& sp, const DecodeItem& it) {
  return min(sp.num_splits, (it.p - it.lo) / sp.chunk + 1);
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

// O / l of the warp's columns for the valid heads: the final bf16 output with one split,
// else this split's partial (normalized output, and (max, sum) from warp 0).
template <int DH, int NV>
__device__ __forceinline__ void store_split(const AttnArgs& a, const SplitArgs& sp,
                                            const DecodeItem& it, int kvh, int h0, int split,
                                            const float (&o)[NV][4], const float (&m)[2],
                                            const float (&l)[2]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_heads = min(16, a.group - h0);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int hr = (lane >> 2) + 8 * r;
    if (hr >= num_heads) continue;
    const int head = kvh * a.group + h0 + hr;
    const int64_t item = int64_t(sp.by_row ? it.row : it.token) * a.num_q_heads + head;
    const int64_t part = item * sp.num_splits + split;
#pragma unroll
    for (int nv = 0; nv < NV; nv++) {
      const int col = warp * (DH / 4) + nv * 8 + 2 * (lane & 3);
      if (col >= a.head_dim) continue;
      const float x = o[nv][2 * r] * inv, y = o[nv][2 * r + 1] * inv;
      if (sp.num_splits == 1) {
        bf16* dst = a.out + (int64_t(it.token) * a.num_q_heads + head) * a.head_dim + col;
        *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(x, y);
      } else {
        *reinterpret_cast<float2*>(sp.part_o + part * a.head_dim + col) = make_float2(x, y);
      }
    }
    if (sp.num_splits > 1 && warp == 0 && (lane & 3) == 0)
      sp.part_ml[part] = make_float2(m[r], sum);
  }
}

// One CTA: one token, 16 query heads of one kv head, one split of the keys.
// grid = (X, Hkv · ceil(G / 16), num_splits).
template <int DH>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, SplitArgs sp) {
  using Shape = DecodeShape<DH>;
  constexpr int BN = Shape::kBlockN, ST = Shape::kStride, STAGES = Shape::kStages;
  constexpr int NV = DH / 4 / 8;  // each warp owns a quarter of the head dim
  constexpr bool kQInRegs = Shape::kQInRegs;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t q_base = smem_addr(smem_raw);
  const uint32_t kv_base = q_base + 16 * ST * 2;  // stage s: K at +2s·BN rows, V after it
  auto k_stage = [&](int s) { return kv_base + uint32_t(2 * s * BN * ST * 2); };
  auto v_stage = [&](int s) { return kv_base + uint32_t((2 * s + 1) * BN * ST * 2); };

  DecodeItem it;
  if (!find_item(a, sp.by_row, blockIdx.x, it)) return;
  const int head_groups = (a.group + 15) / 16;
  const int kvh = blockIdx.y / head_groups, h0 = (blockIdx.y % head_groups) * 16;
  const int split = blockIdx.z, k0 = it.lo + split * sp.chunk;
  if (k0 > it.p) return;  // past the token's keys: combine_kernel skips this split
  const int k1 = split == sp.num_splits - 1 ? it.p + 1 : min(it.p + 1, k0 + sp.chunk);
  const int32_t* bt_row = a.block_table + int64_t(it.row) * a.max_blocks;
  const int num_tiles = (k1 - k0 + BN - 1) / BN;

  load_q_heads<DH>(q_base, a, it.token, kvh, h0);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < STAGES; s++) {
    if (s < num_tiles) {
      load_kv_tile<BN, DH, ST>(k_stage(s), a.k, bt_row, a, kvh, k0 + s * BN, k1 - 1, 0);
      load_kv_tile<BN, DH, ST>(v_stage(s), a.v, bt_row, a, kvh, k0 + s * BN, k1 - 1, 0);
    }
    cp_async_commit();
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t q_lane = q_base + a_lane_offset(lane, ST);
  const uint32_t k_lane = k_lane_offset(lane, ST);
  const uint32_t v_lane = v_lane_offset(lane, ST) + uint32_t(warp * (DH / 4) * 2);
  const int lo[2] = {k0, k0}, hi[2] = {k1 - 1, k1 - 1};
  uint32_t qf[kQInRegs ? DH / 16 : 1][4];
  float o[NV][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;
  cp_async_wait<STAGES>();  // Q landed
  __syncthreads();
  if constexpr (kQInRegs) load_q_frags<DH>(qf, q_lane);

  for (int t = 0; t < num_tiles; t++) {
    const int stage = t % STAGES, kt = k0 + t * BN;
    cp_async_wait<STAGES - 1>();  // tile t landed
    __syncthreads();
    float s[BN / 8][4];
    warp_qk<DH, BN, ST, kQInRegs>(s, qf, q_lane, k_stage(stage) + k_lane);
    score_tile<BN>(s, a, kt, lo, hi, kt + BN > k1, lane);
    online_softmax<BN, NV>(s, o, m, l);
    warp_pv<BN, NV, ST>(o, s, v_stage(stage) + v_lane);
    __syncthreads();  // every warp is done with this stage
    if (t + STAGES < num_tiles) {
      load_kv_tile<BN, DH, ST>(k_stage(stage), a.k, bt_row, a, kvh, kt + STAGES * BN, k1 - 1, 0);
      load_kv_tile<BN, DH, ST>(v_stage(stage), a.v, bt_row, a, kvh, kt + STAGES * BN, k1 - 1, 0);
    }
    cp_async_commit();  // possibly empty: keeps one group per tile
  }
  store_split<DH, NV>(a, sp, it, kvh, h0, split, o, m, l);
}

// Merges the live splits of one (item, query head): weights l_s·2^(m_s - max).
// grid = (X, Hq).
__global__ void __launch_bounds__(kThreads) combine_kernel(AttnArgs a, SplitArgs sp) {
  __shared__ float2 s_ml[kMaxSplits];
  DecodeItem it;
  if (!find_item(a, sp.by_row, blockIdx.x, it)) return;
  const int head = blockIdx.y, n = live_splits(sp, it);
  const int64_t base = (int64_t(blockIdx.x) * a.num_q_heads + head) * sp.num_splits;
  for (int s = threadIdx.x; s < n; s += kThreads) s_ml[s] = sp.part_ml[base + s];
  __syncthreads();
  float mx = -INFINITY;
  for (int s = 0; s < n; s++) mx = fmaxf(mx, s_ml[s].x);
  const float base_m = mx == -INFINITY ? 0.f : mx;
  float total = 0.f;
  for (int s = 0; s < n; s++) total += s_ml[s].y * fast_exp2(s_ml[s].x - base_m);
  const float inv = total > 0.f ? 1.f / total : 0.f;
  bf16* dst = a.out + (int64_t(it.token) * a.num_q_heads + head) * a.head_dim;
  for (int col = 2 * threadIdx.x; col < a.head_dim; col += 2 * kThreads) {
    float x = 0.f, y = 0.f;
    for (int s = 0; s < n; s++) {
      const float w = s_ml[s].y * fast_exp2(s_ml[s].x - base_m);
      const float2 v = *reinterpret_cast<const float2*>(sp.part_o + (base + s) * a.head_dim + col);
      x += w * v.x;
      y += w * v.y;
    }
    *reinterpret_cast<__nv_bfloat162*>(dst + col) = __floats2bfloat162_rn(x * inv, y * inv);
  }
}

template <int DH>
void launch(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream) {
  constexpr int smem = DecodeShape<DH>::kSmemBytes;
  auto kernel = decode_kernel<DH>;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
             "attention decode: cudaFuncSetAttribute");
  const int head_groups = (a.group + 15) / 16;
  const dim3 grid(unsigned(num_x), unsigned(a.num_kv_heads * head_groups), unsigned(sp.num_splits));
  kernel<<<grid, kThreads, smem, stream>>>(a, sp);
  TANDEM_CUDA_LAUNCHED("attention decode kernel");
  if (sp.num_splits > 1) {
    combine_kernel<<<dim3(unsigned(num_x), unsigned(a.num_q_heads)), kThreads, 0, stream>>>(a, sp);
    TANDEM_CUDA_LAUNCHED("attention decode combine kernel");
  }
}

}  // namespace

void launch_decode(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream) {
  cuda_require(sp.num_splits >= 1 && sp.num_splits <= kMaxSplits && sp.chunk > 0,
               "attention decode: bad split plan");
  cuda_require(sp.num_splits == 1 || (sp.part_o && sp.part_ml),
               "attention decode: split partials need a workspace");
  if (num_x <= 0) return;
  switch (padded_head_dim(a.head_dim)) {
    case 32:
      return launch<32>(a, sp, num_x, stream);
    case 64:
      return launch<64>(a, sp, num_x, stream);
    case 96:
      return launch<96>(a, sp, num_x, stream);
    case 128:
      return launch<128>(a, sp, num_x, stream);
    case 256:
      return launch<256>(a, sp, num_x, stream);
    case 512:
      return launch<512>(a, sp, num_x, stream);
    default:
      cuda_fail("attention decode: head dim above 512");
  }
}

}  // namespace tandem::attn
