// Grouped expert GEMM (see cuda_moe_gemm.h): bf16 tensor-core tiles through WMMA, f32
// accumulation. A block computes a 64 x 64 output tile of one expert: 4 warps, each 32 x 32
// (2 x 2 fragments of 16 x 16), stepping K by 32 through shared memory. The gate/up variant
// computes the gate and up tiles of the same columns together and fuses the activation:
// accumulator fragments of one type map element i to the same (row, col), so
// act(gate.x[i]) * up.x[i] is the output element-wise.
//
// The FP8 variant (expert_gemm_fp8_kernel, below) runs the same tiles on e4m3 experts (the
// reference of the e4m3 tensor-core kernel, cuda_moe_gemm_fp8_mma.cu). The
// bf16 kernel also takes ggml block-type experts (BlockWeights: each B tile decoded to bf16
// in shared memory).
#include <mma.h>

#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_decode.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_moe_gemm.h"
#include "backend/cuda/cuda_moe_tiles.cuh"

namespace tandem::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = kMoeTileRows, kBN = 64, kBK = kMoeTileK;
constexpr int kLds = kBK + 8;     // bf16 row stride in shared memory (a multiple of 8, and
                                  // 80 bytes: consecutive rows start in different banks)
constexpr int kLdc = kBN + 4;     // f32 row stride of the output staging tile
constexpr int kThreads = 128;     // 4 warps
constexpr int kChunks = kBK / 8;  // 16-byte chunks per tile row

// dst[0, 8) = src[0, min(8, avail)), zeros elsewhere (src null: all zeros).
// With kVec, avail is a multiple of 8 and src 16-byte aligned.
template <bool kVec>
__device__ __forceinline__ void copy_chunk(bf16* dst, const bf16* src, int64_t avail) {
  if (src == nullptr || avail <= 0) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  } else if constexpr (kVec) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) dst[i] = i < avail ? src[i] : __float2bfloat16_rn(0.f);
  }
}

using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Both kernels' accumulators from zero (acc_up only when gated).
template <bool kGated>
__device__ __forceinline__ void zero(Acc (&acc)[2][2], Acc (&acc_up)[2][2]) {
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      wmma::fill_fragment(acc[i][j], 0.f);
      if constexpr (kGated) wmma::fill_fragment(acc_up[i][j], 0.f);
    }
}

// One K step of a warp's 32 x 32 corner (rows wr, columns wc) of the 64 x 64 tile:
// acc += As · Bs[0]ᵀ, and acc_up += As · Bs[1]ᵀ when gated. Both kernels' inner loop.
template <bool kGated, int kB>
__device__ __forceinline__ void mma_chunk(Acc (&acc)[2][2], Acc (&acc_up)[2][2],
                                          const bf16 (&As)[kBM][kLds],
                                          const bf16 (&Bs)[kB][kBN][kLds], int wr, int wc) {
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
#pragma unroll
    for (int i = 0; i < 2; i++) wmma::load_matrix_sync(fa[i], &As[wr + 16 * i][kk], kLds);
#pragma unroll
    for (int j = 0; j < 2; j++) {
      wmma::load_matrix_sync(fb, &Bs[0][wc + 16 * j][kk], kLds);
#pragma unroll
      for (int i = 0; i < 2; i++) wmma::mma_sync(acc[i][j], fa[i], fb, acc[i][j]);
      if constexpr (kGated) {
        wmma::load_matrix_sync(fb, &Bs[1][wc + 16 * j][kk], kLds);
#pragma unroll
        for (int i = 0; i < 2; i++) wmma::mma_sync(acc_up[i][j], fa[i], fb, acc_up[i][j]);
      }
    }
  }
}

// Where the B tiles (weight rows) come from: W::chunk(dst, row, k, K) writes the 8 values
// [k, k + 8) of weight row `row` (rows counted over all experts) to dst as bf16.
//   Bf16Weights: bf16 rows as stored, copied (kVec: 16-byte chunks, K % 8 == 0);
//   BlockWeights<T>: ggml block rows (K a whole number of blocks), each octet decoded
//     (cuda_block_decode.cuh) and rounded to bf16.
template <bool kVec>
struct Bf16Weights {
  const bf16* w;  // [rows, K]
  __device__ void chunk(bf16* dst, int64_t row, int64_t k, int64_t K) const {
    copy_chunk<kVec>(dst, w + row * K + k, K - k);
  }
};

template <DType T>
struct BlockWeights {
  const uint8_t* w;   // [rows, K / kElems blocks]
  int64_t row_bytes;  // (K / kElems) · kBytes
  __device__ void chunk(bf16* dst, int64_t row, int64_t k, int64_t) const {
    using O = Octets<T>;
    const Octet q =
        O::get(w + row * row_bytes + (k / O::kElems) * O::kBytes, int(k % O::kElems) / 8);
    float v[8];
    octet_values<T>(q, v);
    __nv_bfloat162 h[4];
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(h);
  }
};

// out[s, n] for the slots s of one expert row tile and columns [n0, n0 + 64):
//   plain: out[s, n] = in[src(s)] · w_e[n] (+ bias[n])
//   gated: out[s, n] = act(in[src(s)] · w_e[n]) * (in[src(s)] · w_e[N + n])
// src(s) = in_row ? in_row[s] : s.   out [slots, N] (bf16 or f32), in [*, K],
// w [E, (gated ? 2 : 1) * N, K] through W, bias [N] or null (plain only)
// grid: (ceil(N / 64), rows.max_row_tiles)
template <bool kGated, bool kVec, Activation A, class W, typename Out>
__global__ void __launch_bounds__(kThreads)
    expert_gemm_kernel(Out* __restrict__ out, const bf16* __restrict__ in,
                       const int32_t* __restrict__ in_row, const W w, const ExpertRows rows,
                       const bf16* __restrict__ bias, int64_t N, int64_t K) {
  constexpr int kB = kGated ? 2 : 1;
  __shared__ __align__(32) bf16 As[kBM][kLds];
  __shared__ __align__(32) bf16 Bs[kB][kBN][kLds];
  __shared__ __align__(32) float Cs[kBM][kLdc];
  __shared__ int64_t a_src[kBM];  // element offset of each tile row in `in`, -1 past the rows

  const MoeRowTile rt = moe_row_tile(rows);
  if (rt.expert < 0) return;  // the whole block leaves
  const int e = rt.expert;
  const int64_t row0 = rt.row0, num_rows = rt.num_rows;
  const int64_t n0 = int64_t(blockIdx.x) * kBN;
  const int64_t we = int64_t(e) * kB * N;  // expert e's first weight row
  for (int r = threadIdx.x; r < kBM; r += kThreads)
    a_src[r] = r < num_rows ? int64_t(in_row ? in_row[row0 + r] : row0 + r) * K : -1;
  __syncthreads();

  const int warp = int(threadIdx.x) / 32;
  const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;
  Acc acc[2][2], acc_up[2][2];
  zero<kGated>(acc, acc_up);

  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    for (int c = threadIdx.x; c < kBM * kChunks; c += kThreads) {
      const int r = c / kChunks, kc = (c % kChunks) * 8;
      const int64_t src = a_src[r];
      copy_chunk<kVec>(&As[r][kc], src < 0 ? nullptr : in + src + k0 + kc, K - k0 - kc);
    }
    for (int c = threadIdx.x; c < kB * kBN * kChunks; c += kThreads) {
      const int b = c / (kBN * kChunks), r = (c / kChunks) % kBN, kc = (c % kChunks) * 8;
      const int64_t n = n0 + r;
      if (n < N && k0 + kc < K)
        w.chunk(&Bs[b][r][kc], we + b * N + n, k0 + kc, K);
      else
        *reinterpret_cast<uint4*>(&Bs[b][r][kc]) = make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    mma_chunk<kGated>(acc, acc_up, As, Bs, wr, wc);
    __syncthreads();  // the next chunk overwrites As / Bs
  }

#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      if constexpr (kGated) {
#pragma unroll
        for (int t = 0; t < acc[i][j].num_elements; t++)
          acc[i][j].x[t] = activate<A>(acc[i][j].x[t]) * acc_up[i][j].x[t];
      }
      wmma::store_matrix_sync(&Cs[wr + 16 * i][wc + 16 * j], acc[i][j], kLdc, wmma::mem_row_major);
    }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kBM * kBN; idx += kThreads) {
    const int r = idx / kBN, c = idx % kBN;
    if (r >= num_rows || n0 + c >= N) continue;
    const float b = bias == nullptr ? 0.f : __bfloat162float(bias[n0 + c]);
    out[(row0 + r) * N + n0 + c] = from_f32<Out>(Cs[r][c] + b);
  }
}

// ---------------------------------------------------------------- FP8 (e4m3) experts
// Correctness first: the reference for a faster kernel, not tuned (it widens both operands
// to bf16 in shared memory, a static-scale input is quantized again for every 64 columns,
// and it folds through shared memory once per column group).
// e4m3 values are exact in bf16 and the product of two is exact in f32, so the bf16 MMA
// over e4m3 values widened to bf16 sums exactly the e4m3 products, in f32: the W8A8
// arithmetic of the FP8 linears. The columns that share one pair of scales (a block_k
// block of block weights, else all of K) are summed in the fragments; at the group's end
// the fragments are "folded": staged through Cs, scaled by s_x(row) · s_w(column), added
// to f32 totals that each thread keeps in registers for the kOwned output elements it
// owns (idx = threadIdx.x + i · kThreads), and restarted from zero.

constexpr int kOwned = kBM * kBN / kThreads;

// One e4m3 byte as bf16, exactly.
__device__ __forceinline__ bf16 bf16_from_f8(uint8_t b) {
  return __ushort_as_bfloat16(uint16_t(bf16x2_from_f8x2(b) & 0xffffu));
}

// dst[0, 8) = the e4m3 bytes src[0, min(8, avail)) as bf16, zeros elsewhere (src null: all
// zeros). With kVec, avail is a multiple of 8 and src 8-byte aligned.
template <bool kVec>
__device__ __forceinline__ void widen_chunk(bf16* dst, const uint8_t* src, int64_t avail) {
  if (src == nullptr || avail <= 0) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  } else if constexpr (kVec) {
    const uint2 u = *reinterpret_cast<const uint2*>(src);
    *reinterpret_cast<uint4*>(dst) = make_uint4(
        bf16x2_from_f8x2(uint16_t(u.x & 0xffffu)), bf16x2_from_f8x2(uint16_t(u.x >> 16)),
        bf16x2_from_f8x2(uint16_t(u.y & 0xffffu)), bf16x2_from_f8x2(uint16_t(u.y >> 16)));
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++)
      dst[i] = i < avail ? bf16_from_f8(src[i]) : __float2bfloat16_rn(0.f);
  }
}

// dst[0, 8) = e4m3(src[i] / s) as bf16 for i < min(8, avail), zeros elsewhere (src null: all
// zeros): a static input scale's quantization, with quantize_row's arithmetic (s in f64,
// inv = 1 / (float)s, f8_quotient). With kVec, avail is a multiple of 8 and src 16-byte
// aligned.
template <bool kVec>
__device__ __forceinline__ void quantize_chunk(bf16* dst, const bf16* src, int64_t avail, double s,
                                               float inv) {
  if (src == nullptr || avail <= 0) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    return;
  }
  uint4 in, out;
  bf16* v = reinterpret_cast<bf16*>(&in);
  bf16* q = reinterpret_cast<bf16*>(&out);
  if constexpr (kVec) {
    in = *reinterpret_cast<const uint4*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = i < avail ? src[i] : __float2bfloat16_rn(0.f);
  }
#pragma unroll
  for (int i = 0; i < 8; i++) q[i] = bf16_from_f8(f8_quotient(__bfloat162float(v[i]), s, inv));
  *reinterpret_cast<uint4*>(dst) = out;
}

// total[i] += C[r][c] · s_x[r] · s_w[c] for the thread's own elements (idx = threadIdx.x +
// i · kThreads, r = idx / 64, c = idx % 64), C the fragments' sums of one column group,
// staged through Cs; then the fragments restart from zero. Every thread of the block calls
// it (two barriers).
template <typename Frag>
__device__ __forceinline__ void fold(Frag (&acc)[2][2], float (*Cs)[kLdc], const float* s_x,
                                     const float* s_w, float (&total)[kOwned], int wr, int wc) {
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
      wmma::store_matrix_sync(&Cs[wr + 16 * i][wc + 16 * j], acc[i][j], kLdc, wmma::mem_row_major);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kOwned; i++) {
    const int idx = int(threadIdx.x) + i * kThreads, r = idx / kBN, c = idx % kBN;
    total[i] += Cs[r][c] * (s_x[r] * s_w[c]);
  }
  __syncthreads();  // Cs and the scales are rewritten by the next fold
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.f);
}

// expert_gemm_kernel's output on e4m3 weights w.w [E, kB·N, K] (gate rows then up rows when
// gated) and the input `in` (Fp8ExpertInput: e4m3 rows and their scales, or bf16 rows
// quantized here by the expert's static scale when kStatic), row src(s) of `in` for slot s.
// kVec: K % 8 == 0, w.w and in.q 8-byte aligned, in.x 16-byte aligned.
// grid: (ceil(N / 64), rows.max_row_tiles)
template <bool kGated, bool kVec, bool kStatic, Activation A>
__global__ void __launch_bounds__(kThreads)
    expert_gemm_fp8_kernel(bf16* __restrict__ out, const Fp8ExpertInput in,
                           const int32_t* __restrict__ in_row, const Fp8ExpertWeights w,
                           const ExpertRows rows, int64_t N, int64_t K) {
  constexpr int kB = kGated ? 2 : 1;
  __shared__ __align__(32) bf16 As[kBM][kLds];
  __shared__ __align__(32) bf16 Bs[kB][kBN][kLds];
  __shared__ __align__(32) float Cs[kBM][kLdc];
  __shared__ int64_t a_row[kBM];  // row of `in` of each tile row, -1 past the rows
  __shared__ float s_x[kBM];      // the folded group's input scale of each tile row
  __shared__ float s_w[kB][kBN];  // ... and weight scale of each tile column, per half

  const MoeRowTile rt = moe_row_tile(rows);
  if (rt.expert < 0) return;  // the whole block leaves
  const int e = rt.expert;
  const int64_t row0 = rt.row0, num_rows = rt.num_rows;
  const int64_t n0 = int64_t(blockIdx.x) * kBN, Nw = kB * N;
  const uint8_t* we = w.w + int64_t(e) * Nw * K;
  for (int r = threadIdx.x; r < kBM; r += kThreads)
    a_row[r] = r < num_rows ? int64_t(in_row ? in_row[row0 + r] : row0 + r) : -1;
  __syncthreads();

  // The column groups: block_k columns of block weights (a multiple of kBK, so each K step
  // lies in one group), else all of K; dynamic inputs have one scale per row and group.
  // (Scales are looked up per weight row, so a block may straddle the tile's columns.)
  WeightScales ws = w.scales;
  ws.s += int64_t(e) * w.scales_per_expert;
  const int64_t group = ws.block() ? w.block_k : K, groups = ws.num_k_blocks;
  double s_static = 1.0;  // as quantize_rows_kernel takes a static scale: in f64
  if constexpr (kStatic) s_static = double(in.input_scale[e]);
  const float inv_static = float(1.0 / s_static);

  const int warp = int(threadIdx.x) / 32;
  const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;
  Acc acc[2][2], acc_up[2][2];
  zero<kGated>(acc, acc_up);
  float total[kOwned] = {}, total_up[kOwned] = {};

  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    for (int c = threadIdx.x; c < kBM * kChunks; c += kThreads) {
      const int r = c / kChunks, kc = (c % kChunks) * 8;
      const int64_t src = a_row[r];
      if constexpr (kStatic)
        quantize_chunk<kVec>(&As[r][kc], src < 0 ? nullptr : in.x + src * K + k0 + kc, K - k0 - kc,
                             s_static, inv_static);
      else
        widen_chunk<kVec>(&As[r][kc], src < 0 ? nullptr : in.q + src * K + k0 + kc, K - k0 - kc);
    }
    for (int c = threadIdx.x; c < kB * kBN * kChunks; c += kThreads) {
      const int b = c / (kBN * kChunks), r = (c / kChunks) % kBN, kc = (c % kChunks) * 8;
      const int64_t n = n0 + r;
      widen_chunk<kVec>(&Bs[b][r][kc], n < N ? we + (b * N + n) * K + k0 + kc : nullptr,
                        K - k0 - kc);
    }
    __syncthreads();
    mma_chunk<kGated>(acc, acc_up, As, Bs, wr, wc);
    __syncthreads();  // the next chunk overwrites As / Bs

    if ((k0 + kBK) % group != 0 && k0 + kBK < K) continue;  // the group goes on
    const int64_t kb = k0 / group;                          // the group that ends here
    for (int r = threadIdx.x; r < kBM; r += kThreads) {
      const int64_t src = a_row[r];
      s_x[r] = src < 0 ? 0.f : kStatic ? float(s_static) : in.scales[src * groups + kb];
    }
    for (int c = threadIdx.x; c < kB * kBN; c += kThreads) {
      const int b = c / kBN;
      const int64_t n = n0 + c % kBN;
      s_w[b][c % kBN] = n < N ? ws.at(b * N + n, kb) : 0.f;
    }
    // (fold's first barrier orders these writes before the reads.)
    fold(acc, Cs, s_x, s_w[0], total, wr, wc);
    if constexpr (kGated) fold(acc_up, Cs, s_x, s_w[1], total_up, wr, wc);
  }

#pragma unroll
  for (int i = 0; i < kOwned; i++) {
    const int idx = int(threadIdx.x) + i * kThreads, r = idx / kBN, c = idx % kBN;
    const float v = kGated ? activate<A>(total[i]) * total_up[i] : total[i];
    if (r < num_rows && n0 + c < N) out[(row0 + r) * N + n0 + c] = __float2bfloat16_rn(v);
  }
}

dim3 expert_grid(const ExpertRows& rows, int64_t N) {
  return moe_expert_grid(rows, N, kBN);
}

template <bool kGated, Activation A>
void launch(cudaStream_t stream, bf16* out, const bf16* in, const int32_t* in_row, const bf16* w,
            const ExpertRows& rows, int64_t N, int64_t K, bool vec) {
  if (rows.max_row_tiles <= 0 || N <= 0) return;
  const dim3 grid = expert_grid(rows, N);
  if (vec)
    expert_gemm_kernel<kGated, true, A>
        <<<grid, kThreads, 0, stream>>>(out, in, in_row, Bf16Weights<true>{w}, rows, nullptr, N, K);
  else
    expert_gemm_kernel<kGated, false, A><<<grid, kThreads, 0, stream>>>(
        out, in, in_row, Bf16Weights<false>{w}, rows, nullptr, N, K);
  TANDEM_CUDA_LAUNCHED(kGated ? "expert_gemm_kernel (gate_up)" : "expert_gemm_kernel (down)");
}

// The grouped (or dense) GEMM over ggml block rows; x rows 16-byte aligned, K whole blocks.
template <bool kGated, Activation A, typename Out>
void launch_block(cudaStream_t stream, Out* out, const bf16* in, const int32_t* in_row,
                  const BlockExperts& w, const ExpertRows& rows, const bf16* bias, int64_t N,
                  int64_t K) {
  if (rows.max_row_tiles <= 0 || N <= 0) return;
  const dim3 grid = expert_grid(rows, N);
  const int64_t row_bytes = int64_t(dtype_row_bytes(w.dtype, K));
  with_block_dtype(w.dtype, [&]<DType T>() {
    expert_gemm_kernel<kGated, true, A><<<grid, kThreads, 0, stream>>>(
        out, in, in_row, BlockWeights<T>{w.w, row_bytes}, rows, bias, N, K);
  });
  TANDEM_CUDA_LAUNCHED(kGated ? "expert_gemm_kernel (block gate_up)"
                              : "expert_gemm_kernel (block)");
}

bool aligned8(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 7u) == 0;
}

template <bool kGated, Activation A>
void launch_fp8(cudaStream_t stream, bf16* out, const Fp8ExpertInput& in, const int32_t* in_row,
                const Fp8ExpertWeights& w, const ExpertRows& rows, int64_t N, int64_t K) {
  if (rows.max_row_tiles <= 0 || N <= 0) return;
  const dim3 grid = expert_grid(rows, N);
  const bool vec =
      K % 8 == 0 && aligned8(w.w) && (in.is_static() ? aligned16(in.x) : aligned8(in.q));
  auto kernel = in.is_static() ? (vec ? &expert_gemm_fp8_kernel<kGated, true, true, A>
                                      : &expert_gemm_fp8_kernel<kGated, false, true, A>)
                               : (vec ? &expert_gemm_fp8_kernel<kGated, true, false, A>
                                      : &expert_gemm_fp8_kernel<kGated, false, false, A>);
  kernel<<<grid, kThreads, 0, stream>>>(out, in, in_row, w, rows, N, K);
  TANDEM_CUDA_LAUNCHED(kGated ? "expert_gemm_fp8_kernel (gate_up)"
                              : "expert_gemm_fp8_kernel (down)");
}

}  // namespace

void launch_moe_gate_up(cudaStream_t stream, bf16* a, const bf16* x, const int32_t* token,
                        const bf16* gate_up, const ExpertRows& rows, int64_t D, int64_t F,
                        Activation act) {
  const bool vec = D % 8 == 0 && aligned16(x) && aligned16(gate_up);
  if (act == Activation::SiLU)
    launch<true, Activation::SiLU>(stream, a, x, token, gate_up, rows, F, D, vec);
  else
    launch<true, Activation::GeluTanh>(stream, a, x, token, gate_up, rows, F, D, vec);
}

void launch_moe_down(cudaStream_t stream, bf16* y, const bf16* a, const bf16* down,
                     const ExpertRows& rows, int64_t D, int64_t F) {
  const bool vec = F % 8 == 0 && aligned16(a) && aligned16(down);
  // The activation parameter is unused by the plain variant.
  launch<false, Activation::SiLU>(stream, y, a, nullptr, down, rows, D, F, vec);
}

void launch_moe_gate_up_block(cudaStream_t stream, bf16* a, const bf16* x, const int32_t* token,
                              const BlockExperts& gate_up, const ExpertRows& rows, int64_t D,
                              int64_t F, Activation act) {
  if (act == Activation::SiLU)
    launch_block<true, Activation::SiLU>(stream, a, x, token, gate_up, rows, nullptr, F, D);
  else
    launch_block<true, Activation::GeluTanh>(stream, a, x, token, gate_up, rows, nullptr, F, D);
}

void launch_moe_down_block(cudaStream_t stream, bf16* y, const bf16* a, const BlockExperts& down,
                           const ExpertRows& rows, int64_t D, int64_t F) {
  launch_block<false, Activation::SiLU>(stream, y, a, nullptr, down, rows, nullptr, D, F);
}

void launch_moe_gate_up_fp8(cudaStream_t stream, bf16* a, const Fp8ExpertInput& x,
                            const int32_t* token, const Fp8ExpertWeights& gate_up,
                            const ExpertRows& rows, int64_t D, int64_t F, Activation act) {
  if (act == Activation::SiLU)
    launch_fp8<true, Activation::SiLU>(stream, a, x, token, gate_up, rows, F, D);
  else
    launch_fp8<true, Activation::GeluTanh>(stream, a, x, token, gate_up, rows, F, D);
}

void launch_moe_down_fp8(cudaStream_t stream, bf16* y, const Fp8ExpertInput& a,
                         const Fp8ExpertWeights& down, const ExpertRows& rows, int64_t D,
                         int64_t F) {
  launch_fp8<false, Activation::SiLU>(stream, y, a, nullptr, down, rows, D, F);
}

}  // namespace tandem::cuda
