// The tensor-core GEMM for block-type weights at M > 8 rows (cuda_block_tiles.h).
//
// A CTA of 8 warps computes out[m0 .. m0 + 64, n0 .. n0 + 128] over its share of K, one
// super-step of kStepK = 256 values at a time (one k-quant super block, eight 32-value
// blocks), in a two-stage pipeline:
//   raw   [128][kRawStride]  the step's weight bytes of 128 rows, copied by cp.async in
//                            16-byte segments (a row's 256 values are kChunkBytes, not
//                            always a multiple of 16: the segments cover them from the one
//                            holding their first byte, which keeps each block's address
//                            mod 16 as in HBM, so the decoders' aligned loads stay aligned)
//   xs    [64][kStride]      the step's x values (bf16), cp.async; rows past M and
//                            values past K are zeros
//   wd    [128][kStride]     the weights decoded to bf16 (one buffer: decoded after the
//                            barrier that ends the last step's products)
// Per step: wait for stage s; barrier; issue the copies of step s + 1 into the other stage;
// decode raw -> wd (a warp per row, a lane per octet: Octets<T>::get, the helpers of the
// weight stream); barrier; each warp takes 32 weight rows x 32 x rows through mma.sync
// m16n8k16 (bf16 in, f32 sums), both operands by ldmatrix from K-contiguous rows (the
// +8-element row pad puts the 8 rows of an ldmatrix in distinct banks).
// The weight is the mma's A (rows n), x its B (columns m), so a thread's sums are
// out[m][n] for n = lane / 4 (+8) and m = 2 (lane % 4) (+1) within each 16 x 8 tile.
//
// With few tiles (N / 128 · M / 64 under the SM count) K is split across CTAs (grid.z),
// each writing f32 partial sums [split][M][N] that reduce_splits_kernel adds (with the
// bias) into out; else the CTA writes out itself. The weights are read once per 64 rows.
// The loads, the decode, the products and the pipeline are cuda_block_tiles.cuh's (shared
// with the grouped expert GEMMs, cuda_moe_block_tiles.cu); this file keeps the dense
// linear's rows, its K splits and its stores.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_tiles.cuh"
#include "backend/cuda/cuda_block_tiles.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;
using namespace cuda::block_tiles;

// What every CTA of one launch shares.
struct TileArgs {
  void* out;         // [M, N] bf16 or f32; null when splitting
  float* partial;    // [splits, M, N] f32 when splitting, else null
  const uint8_t* w;  // [N, K] in blocks, 16-byte aligned
  const bf16* x;     // [M, K], 16-byte aligned
  const bf16* bias;  // [N] or null (never with partial)
  int64_t row_bytes;
  int M, N, K;
  int steps_per_split;  // pipeline steps of a CTA (its z-th share of ceil(K / 256))
  bool out_f32;
};

// Each thread's sums to out (+ bias) or to its split's partial sums.
__device__ __forceinline__ void store_tile(const TileArgs& a, const float (&acc)[2][4][4], int n0,
                                           int m0) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int wn = warp % kWarpsN, wm = warp / kWarpsN;
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int t = 0; t < 4; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int n = n0 + wn * 32 + i * 16 + lane / 4 + 8 * (e / 2);
        const int m = m0 + wm * 32 + t * 8 + 2 * (lane % 4) + e % 2;
        if (n >= a.N || m >= a.M) continue;
        float v = acc[i][t][e];
        if (a.partial != nullptr) {
          a.partial[(int64_t(blockIdx.z) * a.M + m) * a.N + n] = v;
          continue;
        }
        if (a.bias != nullptr) v += __bfloat162float(a.bias[n]);
        if (a.out_f32)
          static_cast<float*>(a.out)[int64_t(m) * a.N + n] = v;
        else
          static_cast<bf16*>(a.out)[int64_t(m) * a.N + n] = __float2bfloat16_rn(v);
      }
}

// grid: (ceil(N / 128), ceil(M / 64), splits), block kThreads, dynamic smem Step<T>::kSmem
template <DType T>
__global__ void __launch_bounds__(kThreads, 1) block_tiles_kernel(TileArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const Smem<T> sm{smem};
  cuda::pdl_launch_next();
  const int n0 = int(blockIdx.x) * kTileN, m0 = int(blockIdx.y) * kTileM;
  const int steps = (a.K + kStepK - 1) / kStepK;
  const int kt0 = int(blockIdx.z) * a.steps_per_split;
  const int kt1 = min(steps, kt0 + a.steps_per_split);
  // Rows past N are computed from row N - 1 and never stored.
  const auto row_of = [&](int r) { return a.w + int64_t(min(n0 + r, a.N - 1)) * a.row_bytes; };
  const auto x_row = [&](int r) -> const bf16* {
    return m0 + r < a.M ? a.x + int64_t(m0 + r) * a.K : nullptr;
  };
  float acc[2][4][4] = {};
  // The first weights before the wait (no kernel writes them), x after it. plan_splits
  // leaves no split empty; the guard would keep an empty one from reading past K.
  if (kt0 < kt1) load_weights<T>(sm.raw(0), row_of, kt0, a.K);
  cuda::pdl_wait();
  if (kt0 < kt1) {
    load_x(sm.xs(0), x_row, a.x, kt0, a.K);
    run_steps<T>(sm, acc, row_of, x_row, a.x, kt0, kt1, a.K, live_columns(a.M - m0));
  }
  store_tile(a, acc, n0, m0);
}

// out [M, N] = Σ_z partial[z] (+ bias).   grid: any (grid-stride), block 256
__global__ void reduce_splits_kernel(void* __restrict__ out, bool out_f32,
                                     const float* __restrict__ partial,
                                     const bf16* __restrict__ bias, int splits, int64_t MN, int N) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < MN;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = bias != nullptr ? __bfloat162float(bias[i % N]) : 0.f;
    for (int z = 0; z < splits; z++) v += partial[z * MN + i];
    if (out_f32)
      static_cast<float*>(out)[i] = v;
    else
      static_cast<bf16*>(out)[i] = __float2bfloat16_rn(v);
  }
}

// Splits of K: enough CTAs to give most SMs one (a CTA fills an SM's shared memory), never
// more than one wave of them, every split at least one step.
int plan_splits(int64_t tiles, int steps, int num_sms) {
  if (tiles >= num_sms || steps < 2) return 1;
  const int want = std::clamp(int(num_sms / tiles), 1, steps);
  const int per = (steps + want - 1) / want;
  return (steps + per - 1) / per;
}

template <DType T>
void launch_tiles(CudaBackend& be, TileArgs a, int splits, dim3 grid) {
  static std::atomic<uint64_t> smem_ready{0};
  auto kernel = &block_tiles_kernel<T>;
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), Step<T>::kSmem, smem_ready,
                           "block tiles");
  grid.z = unsigned(splits);
  cuda::launch_pdl("block_tiles_kernel", kernel, grid, dim3(kThreads), size_t(Step<T>::kSmem),
                   be.stream(), a);
}

}  // namespace

bool block_tiles_fit(const CudaBackend& be, const Tensor& x, const Tensor& w) {
  int smem = 0;
  cuda::with_block_dtype(w.dtype, [&]<DType T>() { smem = Step<T>::kSmem; });
  return x.rows() <= kBlockTilesMaxRows && smem > 0 &&
         size_t(smem) <= be.props().sharedMemPerBlockOptin && cuda::aligned16(x.data) &&
         cuda::aligned16(w.data);
}

void block_tiles_linear(CudaBackend& be, Tensor& out, const Tensor& x, const Tensor& w,
                        const Tensor& bias) {
  const int64_t M = x.rows(), N = w.dim(0), K = w.dim(1);
  const int steps = int((K + kStepK - 1) / kStepK);
  const dim3 grid(unsigned(cuda::ceil_div(N, kTileN)), unsigned(cuda::ceil_div(M, kTileM)));
  const int splits =
      plan_splits(int64_t(grid.x) * grid.y, steps, std::max(1, be.props().multiProcessorCount));
  TileArgs a{};
  a.w = w.ptr<uint8_t>();
  a.x = x.ptr<bf16>();
  a.row_bytes = int64_t(dtype_row_bytes(w.dtype, K));
  a.M = int(M);
  a.N = int(N);
  a.K = int(K);
  a.steps_per_split = (steps + splits - 1) / splits;
  a.out_f32 = out.dtype == DType::F32;
  Tensor partial;
  if (splits > 1) {
    partial = be.alloc(DType::F32, {splits * M, N});
    a.partial = partial.ptr<float>();
  } else {
    a.out = out.data;
    a.bias = bias.defined() ? bias.ptr<bf16>() : nullptr;
  }
  cuda::with_block_dtype(w.dtype, [&]<DType T>() { launch_tiles<T>(be, a, splits, grid); });
  if (splits == 1) return;
  const int64_t MN = M * N;
  cuda::launch_pdl("reduce_splits_kernel", &reduce_splits_kernel,
                   dim3(cuda::grid_stride_blocks(MN, 256)), dim3(256), 0, be.stream(), out.data,
                   a.out_f32, partial.ptr<float>(), bias.defined() ? bias.ptr<bf16>() : nullptr,
                   splits, MN, int(N));
}

}  // namespace tandem
