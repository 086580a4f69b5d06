// Private to the paged attention files (cuda_attention*.cu): the launch arguments, the
// sm_80+ primitives (cp.async, ldmatrix, mma.sync m16n8k16 bf16), and the warp-level
// pieces of one flash-attention step that the prefill and decode kernels share.
//
// Fragment conventions (PTX ISA, mma.m16n8k16 .row.col): lane = 4·g + c. A warp owns 16
// query rows; a thread holds rows g and g+8. An S accumulator tile s[nt] covers keys
// 8·nt + 2c, 8·nt + 2c + 1: s[nt][0..1] for row g, s[nt][2..3] for row g+8. The O
// accumulator o[nv] covers head-dim columns 8·nv + 2c, +1 the same way.
//
// Scores live in log2 units (score·log2 e) so the softmax uses ex2; the running max of a
// row with no visible key yet is -inf and is replaced by 0 when exponentiating, so fully
// masked rows and tiles produce zeros, never NaN.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_split_plan.h"

namespace tandem::attn {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 128;  // every attention kernel runs 4 warps
constexpr int kMaxHeadDim = 512;
constexpr float kLog2e = 1.4426950408889634f;

// Everything one attention launch reads. All pointers are device memory.
struct AttnArgs {
  const bf16* q = nullptr;               // [T, Hq, Dh]
  const void* k = nullptr;               // [num_blocks, block_size, Hkv, Dh] bf16 or e4m3
  const void* v = nullptr;               // [num_blocks, block_size, Hkv, Dh] bf16 or e4m3
  bool kv_f8 = false;                    // the cache holds e4m3 bytes (Dh % 16 == 0)
  bf16* out = nullptr;                   // [T, Hq, Dh]
  const int32_t* positions = nullptr;    // [T]
  const int32_t* seq_starts = nullptr;   // [B+1]
  const int32_t* block_table = nullptr;  // [B, max_blocks]
  int num_tokens = 0, num_rows = 0, max_blocks = 0, num_blocks = 0;
  int block_size = 16;
  int block_shift = 4;  // log2(block_size) when it is a power of two, else -1
  int num_q_heads = 0, num_kv_heads = 0, group = 1, head_dim = 0;
  // Score in log2 units: no softcap: s·qk_mul (qk_mul = scale·log2 e);
  // softcap: cap_log2·tanh(s·qk_mul) (qk_mul = scale / cap, cap_log2 = cap·log2 e).
  float qk_mul = 0.f;
  float cap_log2 = 0.f;  // 0 = no softcap
  int window = 0;        // >0: a query at p sees keys (p - window, p]
  // [T] the end of the image holding each token (0: none) when the layer lets an image's
  // tokens see each other both ways (AttentionParams::media_bidirectional), else null.
  // Only the prefill kernels read it: a 1-token row's image is the token itself.
  const int32_t* media_ends = nullptr;
};

// How decode work is split over the context (flash-decoding), and where partials go.
// The host fixes only the split count (from the grid size); each CTA derives its keys
// from its token's real key count, read on the device (split_chunk). With several live
// splits, each writes its partial and counts itself in; the last to arrive merges.
struct SplitArgs {
  int num_splits = 1;
  bool by_row = false;        // grid x = rows (only 1-token rows) or tokens (all tokens)
  float* part_o = nullptr;    // [X, Hq, num_splits, Dh] f32, each split's normalized output
  float2* part_ml = nullptr;  // [X, Hq, num_splits]: (max score in log2 units, exp sum)
  // [X, Hkv · head groups] arrival counters, one per (x, kv head, head group): zero
  // before every launch, and the kernel leaves them zero (a persistent buffer).
  int* counters = nullptr;
};

// Launchers (cuda_attention_prefill.cu / cuda_attention_decode.cu). Head dims are padded
// up to the next compiled size; `padded_head_dim` names it (0 = unsupported).
int padded_head_dim(int head_dim);
// Rows with >= 2 query tokens, on the kernel choose_prefill_kernel (cuda_attention_prefill.h)
// names for the device.
void launch_prefill(const AttnArgs& a, const cudaDeviceProp& props, bool sm90_on,
                    cudaStream_t stream);
// The Hopper (wgmma) prefill kernel (cuda_attention_prefill_sm90.cu): bf16 or e4m3 cache,
// head dims in (32, 256] padded to 64 / 128 / 256 (`sm90_padded_head_dim`, 0 = not
// covered), any block size; `prefill_sm90_smem_bytes` is its shared memory per CTA
// (0 = head dim not covered).
void launch_prefill_sm90(const AttnArgs& a, cudaStream_t stream);
int sm90_padded_head_dim(int head_dim);
int prefill_sm90_smem_bytes(int head_dim, bool kv_f8);
// Tokens of 1-token rows (by_row) or every token (!by_row), over num_x = B or T.
void launch_decode(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream);
// Decode CTAs resident per SM for a head dim and cache type (the kernel's occupancy), >= 1.
int decode_ctas_per_sm(int head_dim, bool kv_f8);
// Query heads of one kv head a decode CTA covers (the mma dimension they sit in).
int decode_heads_per_cta(bool kv_f8);
// The e4m3 cache's decode kernel (cuda_attention_decode_f8.cu), called by launch_decode.
void launch_decode_f8(const AttnArgs& a, const SplitArgs& sp, int num_x, cudaStream_t stream);
int decode_f8_ctas_per_sm(int head_dim);
int decode_f8_heads_per_cta();

// ---------------------------------------------------------------- primitives

// Hint: bring the line holding p into L1 (no register, no wait; p must be mapped).
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; bytes == 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// d += a·b for one 16x8x16 tile, bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a·b for one 16x8x16 tile, f16 inputs, f32 accumulators (the e4m3 cache's path:
// every e4m3 value is exact in f16).
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ float fast_exp2(float x) {  // ex2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// tanh with absolute error ~1e-7 (tanh.approx's 2^-11 relative error, times a softcap
// of 30-50, would move scores by ~1e-2). |x| <= 15 keeps 2^(2x·log2 e) finite; tanh(15)
// rounds to 1 in f32.
__device__ __forceinline__ float softcap_tanh(float x) {
  const float e = fast_exp2(fminf(fmaxf(x, -15.f), 15.f) * (2.f * kLog2e));
  return 1.f - __fdividef(2.f, e + 1.f);
}

// First key a query at position p sees (HF: 0 <= p - j < window).
__device__ __forceinline__ int first_key(int p, int window) {
  return window > 0 ? max(0, p - window + 1) : 0;
}

// ---------------------------------------------------------------- tile loads

// Start of the cache row of key j (position in its sequence) of kv head kvh, or null
// when its block-table entry lies outside the table or the pool.
template <typename KV>
__device__ __forceinline__ const KV* kv_row(const KV* cache, const int32_t* bt_row,
                                            const AttnArgs& a, int kvh, int j) {
  const int bi = a.block_shift >= 0 ? j >> a.block_shift : j / a.block_size;
  const int off = a.block_shift >= 0 ? j & (a.block_size - 1) : j % a.block_size;
  const int blk = bi < a.max_blocks ? bt_row[bi] : -1;
  if (blk < 0 || blk >= a.num_blocks) return nullptr;
  const int64_t slot = int64_t(blk) * a.block_size + off;
  return cache + (slot * a.num_kv_heads + kvh) * a.head_dim;
}

__device__ __forceinline__ void st_shared_16(uint32_t addr, const uint4& v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w));
}

// One 16-byte chunk of a cache row into a bf16 tile at dst: bf16 rows go by cp.async;
// e4m3 rows (16 elements per chunk) are loaded, widened and stored (32 bytes), so the
// tile is ready after the next barrier either way. row == null writes zeros.
template <typename KV>
__device__ __forceinline__ void copy_kv_chunk(uint32_t dst, const KV* row, const KV* any) {
  if constexpr (sizeof(KV) == 2) {
    cp_async_16(dst, row ? row : any, row ? 16 : 0);
  } else {
    uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
    if (row) cuda::bf16x16_from_f8x16(__ldg(reinterpret_cast<const uint4*>(row)), lo, hi);
    st_shared_16(dst, lo);
    st_shared_16(dst + 16, hi);
  }
}

// Copies cache rows for keys [kt, kt + ROWS), columns [col0, col0 + COLS) of kv head
// `kvh` into a shared bf16 tile with row stride STRIDE elements. Keys past `kend`,
// columns past the head dim, and block-table entries outside the table or the pool read
// as zero (masked keys must hold finite values: their probability 0 multiplies V).
template <int ROWS, int COLS, int STRIDE, typename KV>
__device__ __forceinline__ void load_kv_tile(uint32_t dst, const KV* cache, const int32_t* bt_row,
                                             const AttnArgs& a, int kvh, int kt, int kend,
                                             int col0) {
  constexpr int kElems = 16 / int(sizeof(KV));  // elements per 16-byte chunk of the cache
  constexpr int kChunksPerRow = COLS / kElems;
  static_assert(COLS % kElems == 0, "a tile row is whole chunks");
  const int tid = threadIdx.x;
  if constexpr (kThreads % kChunksPerRow == 0) {
    // Each thread keeps one 16-byte column and walks rows kThreads / kChunksPerRow apart.
    constexpr int kRowStep = kThreads / kChunksPerRow;
    const int c = tid % kChunksPerRow, col = col0 + c * kElems;
    const bool col_ok = col < a.head_dim;
#pragma unroll
    for (int r = tid / kChunksPerRow; r < ROWS; r += kRowStep) {
      const KV* row = kt + r <= kend && col_ok ? kv_row(cache, bt_row, a, kvh, kt + r) : nullptr;
      copy_kv_chunk(dst + uint32_t((r * STRIDE + c * kElems) * 2), row ? row + col : nullptr,
                    cache);
    }
  } else {
#pragma unroll
    for (int id = tid; id < ROWS * kChunksPerRow; id += kThreads) {
      const int r = id / kChunksPerRow, c = id % kChunksPerRow, col = col0 + c * kElems;
      const KV* row =
          kt + r <= kend && col < a.head_dim ? kv_row(cache, bt_row, a, kvh, kt + r) : nullptr;
      copy_kv_chunk(dst + uint32_t((r * STRIDE + c * kElems) * 2), row ? row + col : nullptr,
                    cache);
    }
  }
}

// ---------------------------------------------------------------- warp math

// ldmatrix lane addresses (bytes from the tile's row 0, column 0).
// A operand (Q rows, row-major): matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15).
__device__ __forceinline__ uint32_t a_lane_offset(int lane, int stride) {
  return uint32_t((((lane & 7) + ((lane >> 3) & 1) * 8) * stride + (lane >> 4) * 8) * 2);
}
// B operand from K rows (keys x dims): x4 = two 8-key tiles x two 8-dim halves.
__device__ __forceinline__ uint32_t k_lane_offset(int lane, int stride) {
  return uint32_t((((lane & 7) + (lane >> 4) * 8) * stride + ((lane >> 3) & 1) * 8) * 2);
}
// B operand from V rows (keys x dims), transposed: x4 = two 8-key halves x two 8-dim tiles.
__device__ __forceinline__ uint32_t v_lane_offset(int lane, int stride) {
  return uint32_t((((lane & 7) + ((lane >> 3) & 1) * 8) * stride + (lane >> 4) * 8) * 2);
}

// A fragments of 16 Q rows for every 16-wide slice of the head dim.
template <int DHQK>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[DHQK / 16][4], uint32_t q_lane) {
#pragma unroll
  for (int ks = 0; ks < DHQK / 16; ks++) ldsm_x4(qf[ks], q_lane + ks * 32);
}

// s = Q·Kᵀ for the warp's 16 rows and BN keys. Q comes from registers (qf) when
// Q_IN_REGS, else from shared memory at q_lane.
template <int DHQK, int BN, int KSTRIDE, bool Q_IN_REGS>
__device__ __forceinline__ void warp_qk(float (&s)[BN / 8][4],
                                        const uint32_t (&qf)[Q_IN_REGS ? DHQK / 16 : 1][4],
                                        uint32_t q_lane, uint32_t k_lane) {
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < DHQK / 16; ks++) {
    uint32_t a[4];
    if constexpr (Q_IN_REGS) {
#pragma unroll
      for (int i = 0; i < 4; i++) a[i] = qf[ks][i];
    } else {
      ldsm_x4(a, q_lane + ks * 32);
    }
#pragma unroll
    for (int np = 0; np < BN / 16; np++) {
      uint32_t b[4];
      ldsm_x4(b, k_lane + uint32_t(np * 16 * KSTRIDE * 2 + ks * 32));
      mma_bf16(s[2 * np], a, b[0], b[1]);
      mma_bf16(s[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Raw dot products -> scores in log2 units (scale, softcap); keys outside the thread's
// row ranges [lo[r], hi[r]] become -inf. kt is the key position of tile column 0.
template <int BN>
__device__ __forceinline__ void score_tile(float (&s)[BN / 8][4], const AttnArgs& a, int kt,
                                           const int (&lo)[2], const int (&hi)[2], bool masked,
                                           int lane) {
  const bool cap = a.cap_log2 > 0.f;
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      float x = s[nt][e] * a.qk_mul;
      if (cap) x = a.cap_log2 * softcap_tanh(x);
      if (masked) {
        const int j = kt + nt * 8 + 2 * (lane & 3) + (e & 1);
        if (j < lo[e >> 1] || j > hi[e >> 1]) x = -INFINITY;
      }
      s[nt][e] = x;
    }
  }
}

// The running max m of the thread's row r (0 or 1) after a tile, over the 4 lanes of its quad.
template <int BN>
__device__ __forceinline__ float tile_row_max(const float (&s)[BN / 8][4], float m, int r) {
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) m = fmaxf(m, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
}

// Online softmax of one tile's scores without touching O: updates the running max m and
// (thread-partial) sum l, turns s into probabilities, and returns in alpha the factor O
// must be scaled by before this tile's P·V is added.
template <int BN>
__device__ __forceinline__ void softmax_tile(float (&s)[BN / 8][4], float (&m)[2], float (&l)[2],
                                             float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float mx = tile_row_max<BN>(s, m[r], r);
    const float base = mx == -INFINITY ? 0.f : mx;  // no visible key yet: P = 0, not NaN
    alpha[r] = fast_exp2(m[r] - base);
    m[r] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++) {
      s[nt][2 * r] = fast_exp2(s[nt][2 * r] - base);
      s[nt][2 * r + 1] = fast_exp2(s[nt][2 * r + 1] - base);
      sum += s[nt][2 * r] + s[nt][2 * r + 1];
    }
    l[r] = l[r] * alpha[r] + sum;
  }
}

// Online softmax step: softmax_tile, then the accumulator o rescaled by its alpha.
template <int BN, int NV>
__device__ __forceinline__ void online_softmax(float (&s)[BN / 8][4], float (&o)[NV][4],
                                               float (&m)[2], float (&l)[2]) {
  float alpha[2];
  softmax_tile<BN>(s, m, l, alpha);
#pragma unroll
  for (int r = 0; r < 2; r++)
#pragma unroll
    for (int nv = 0; nv < NV; nv++) {
      o[nv][2 * r] *= alpha[r];
      o[nv][2 * r + 1] *= alpha[r];
    }
}

// o += P·V over the tile's BN keys for NV 8-column tiles starting at v_lane's column.
template <int BN, int NV, int VSTRIDE>
__device__ __forceinline__ void warp_pv(float (&o)[NV][4], const float (&p)[BN / 8][4],
                                        uint32_t v_lane) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; kk++) {
    const uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]),
                           pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                           pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const uint32_t row = v_lane + uint32_t(kk * 16 * VSTRIDE * 2);
#pragma unroll
    for (int np = 0; np < NV / 2; np++) {
      uint32_t b[4];
      ldsm_x4_trans(b, row + np * 32);
      mma_bf16(o[2 * np], a, b[0], b[1]);
      mma_bf16(o[2 * np + 1], a, b[2], b[3]);
    }
    if constexpr (NV % 2 == 1) {
      uint32_t b[2];
      ldsm_x2_trans(b, row + (NV / 2) * 32);
      mma_bf16(o[NV - 1], a, b[0], b[1]);
    }
  }
}

// Sum of the thread-partial row sums over the 4 lanes of a quad.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

}  // namespace tandem::attn
