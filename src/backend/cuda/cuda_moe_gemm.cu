// Grouped expert GEMM (see cuda_moe_gemm.h): bf16 tensor-core tiles through WMMA, f32
// accumulation. A block computes a 64 x 64 output tile of one expert: 4 warps, each 32 x 32
// (2 x 2 fragments of 16 x 16), stepping K by 32 through shared memory. The gate/up variant
// computes the gate and up tiles of the same columns together and fuses the activation:
// accumulator fragments of one type map element i to the same (row, col), so
// act(gate.x[i]) * up.x[i] is the output element-wise.
#include <mma.h>

#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_moe_gemm.h"

namespace tandem::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = kMoeTileRows, kBN = 64, kBK = 32;
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

// out[s, n] for the slots s of one expert row tile and columns [n0, n0 + 64):
//   plain: out[s, n] = in[src(s)] · w_e[n]
//   gated: out[s, n] = act(in[src(s)] · w_e[n]) * (in[src(s)] · w_e[N + n])
// src(s) = in_row ? in_row[s] : s.   out [slots, N], in [*, K], w [E, (gated ? 2 : 1) * N, K]
// grid: (ceil(N / 64), rows.max_row_tiles)
template <bool kGated, bool kVec, Activation A>
__global__ void __launch_bounds__(kThreads)
    expert_gemm_kernel(bf16* __restrict__ out, const bf16* __restrict__ in,
                       const int32_t* __restrict__ in_row, const bf16* __restrict__ w,
                       const ExpertRows rows, int64_t N, int64_t K) {
  constexpr int kB = kGated ? 2 : 1;
  __shared__ __align__(32) bf16 As[kBM][kLds];
  __shared__ __align__(32) bf16 Bs[kB][kBN][kLds];
  __shared__ __align__(32) float Cs[kBM][kLdc];
  __shared__ int64_t a_src[kBM];  // element offset of each tile row in `in`, -1 past the rows

  const int tile = int(blockIdx.y);
  if (tile >= rows.tile_offsets[rows.num_experts]) return;  // the whole block leaves
  // The expert owning the tile: the last e with tile_offsets[e] <= tile (experts without
  // rows have empty tile ranges and lose to the next one).
  const int e = cuda::last_at_most(rows.tile_offsets, rows.num_experts, tile);
  const int64_t row0 = rows.offsets[e] + int64_t(tile - rows.tile_offsets[e]) * kBM;
  const int64_t num_rows = min(int64_t(kBM), int64_t(rows.offsets[e + 1]) - row0);
  const int64_t n0 = int64_t(blockIdx.x) * kBN;
  const bf16* we = w + int64_t(e) * kB * N * K;
  for (int r = threadIdx.x; r < kBM; r += kThreads)
    a_src[r] = r < num_rows ? int64_t(in_row ? in_row[row0 + r] : row0 + r) * K : -1;
  __syncthreads();

  const int warp = int(threadIdx.x) / 32;
  const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2], acc_up[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      wmma::fill_fragment(acc[i][j], 0.f);
      if constexpr (kGated) wmma::fill_fragment(acc_up[i][j], 0.f);
    }

  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    for (int c = threadIdx.x; c < kBM * kChunks; c += kThreads) {
      const int r = c / kChunks, kc = (c % kChunks) * 8;
      const int64_t src = a_src[r];
      copy_chunk<kVec>(&As[r][kc], src < 0 ? nullptr : in + src + k0 + kc, K - k0 - kc);
    }
    for (int c = threadIdx.x; c < kB * kBN * kChunks; c += kThreads) {
      const int b = c / (kBN * kChunks), r = (c / kChunks) % kBN, kc = (c % kChunks) * 8;
      const int64_t n = n0 + r;
      const bf16* src = n < N ? we + (b * N + n) * K + k0 + kc : nullptr;
      copy_chunk<kVec>(&Bs[b][r][kc], src, K - k0 - kc);
    }
    __syncthreads();
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
    if (r < num_rows && n0 + c < N) out[(row0 + r) * N + n0 + c] = __float2bfloat16_rn(Cs[r][c]);
  }
}

template <bool kGated, Activation A>
void launch(cudaStream_t stream, bf16* out, const bf16* in, const int32_t* in_row, const bf16* w,
            const ExpertRows& rows, int64_t N, int64_t K, bool vec) {
  if (rows.max_row_tiles <= 0 || N <= 0) return;
  if (rows.max_row_tiles > 65535)
    cuda_fail("moe_experts: " + std::to_string(rows.max_row_tiles) +
              " row tiles exceed the grid limit (too many tokens in one step)");
  const dim3 grid(unsigned((N + kBN - 1) / kBN), unsigned(rows.max_row_tiles));
  if (vec)
    expert_gemm_kernel<kGated, true, A>
        <<<grid, kThreads, 0, stream>>>(out, in, in_row, w, rows, N, K);
  else
    expert_gemm_kernel<kGated, false, A>
        <<<grid, kThreads, 0, stream>>>(out, in, in_row, w, rows, N, K);
  TANDEM_CUDA_LAUNCHED(kGated ? "expert_gemm_kernel (gate_up)" : "expert_gemm_kernel (down)");
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
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

}  // namespace tandem::cuda
