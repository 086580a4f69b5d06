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
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_attention.cuh"  // the sm_80 primitives: cp.async, ldmatrix, mma.sync
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_decode.cuh"
#include "backend/cuda/cuda_block_tiles.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;
using cuda::Octets;
using attn::cp_async_16;
using attn::cp_async_commit;
using attn::cp_async_wait;
using attn::ldsm_x4;
using attn::mma_bf16;
using attn::smem_addr;

constexpr int kTileN = 128;              // weight rows of a CTA
constexpr int kTileM = 64;               // x rows of a CTA
constexpr int kStepK = 256;              // values of K per pipeline step
constexpr int kStride = kStepK + 8;      // bf16 elements per row of wd and xs
constexpr int kWarpsN = 4, kWarpsM = 2;  // 32 x 32 outputs a warp
constexpr int kThreads = 32 * kWarpsN * kWarpsM;
constexpr int kStages = 2;

// The per-type sizes: a step's bytes of one weight row, and its raw row in shared memory
// (the most 16-byte segments a chunk can touch at any offset mod 16).
template <DType T>
struct Step {
  static constexpr int kBlocks = kStepK / Octets<T>::kElems;  // 1 or 8
  static constexpr int kChunkBytes = kBlocks * Octets<T>::kBytes;
  static constexpr int kSegs = (15 + kChunkBytes + 15) / 16;
  static constexpr int kRawStride = 16 * kSegs;
  static constexpr int kWdBytes = kTileN * kStride * 2;
  static constexpr int kXsBytes = kTileM * kStride * 2;
  static constexpr int kRawBytes = kTileN * kRawStride;
  static constexpr int kSmem = kWdBytes + kStages * (kXsBytes + kRawBytes);
  // Q8_0's 204 KiB is the most: sm_90's 227 KiB a CTA holds every type (an A100's 163 KiB
  // does not: block_tiles_fit asks the device).
  static_assert(kSmem <= 227 * 1024, "a CTA's shared memory");
};

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

// The address of weight row n's bytes for step kt (n clamped into the weight: rows past N
// are computed from row N - 1 and never stored).
template <DType T>
__device__ __forceinline__ const uint8_t* chunk_of(const TileArgs& a, int n, int kt) {
  return a.w + int64_t(min(n, a.N - 1)) * a.row_bytes + int64_t(kt) * Step<T>::kChunkBytes;
}

// Issues the copies of step kt's weights into one stage: each row's segments (only those its
// chunk touches: the last row never reads past the weight's end, save within its last
// 16-byte segment, which cannot leave the allocation's page).
template <DType T>
__device__ __forceinline__ void load_weights(const TileArgs& a, uint8_t* raw, int n0, int kt) {
  using S = Step<T>;
  const int kvals = min(kStepK, a.K - kt * kStepK);
  const int bytes = kvals / Octets<T>::kElems * Octets<T>::kBytes;
  for (int i = int(threadIdx.x); i < kTileN * S::kSegs; i += kThreads) {
    const int r = i / S::kSegs, s = i % S::kSegs;
    const uint8_t* p = chunk_of<T>(a, n0 + r, kt);
    const int off = int(reinterpret_cast<uintptr_t>(p) & 15);
    if (16 * s < off + bytes)
      cp_async_16(smem_addr(raw + r * S::kRawStride + 16 * s), p - off + 16 * s, 16);
  }
}

// Issues the copies of step kt's x values into one stage (zeros past M and K).
__device__ __forceinline__ void load_x(const TileArgs& a, bf16* xs, int m0, int kt) {
  const int kvals = min(kStepK, a.K - kt * kStepK);
  constexpr int kSegsX = kStepK / 8;  // 16-byte segments of a row of xs
  for (int i = int(threadIdx.x); i < kTileM * kSegsX; i += kThreads) {
    const int r = i / kSegsX, s = i % kSegsX, m = m0 + r;
    const bool ok = m < a.M && 8 * s < kvals;
    const bf16* src = ok ? a.x + int64_t(m) * a.K + int64_t(kt) * kStepK + 8 * s : a.x;
    cp_async_16(smem_addr(xs + r * kStride + 8 * s), src, ok ? 16 : 0);
  }
}

// An octet's 8 values s · (u − o) + b packed as bf16 (round to nearest): the f32 values of
// cuda::octet_values, bit for bit, without its integer-to-float conversions (a quarter-rate
// instruction, and 32k of them a CTA a step): a byte permute makes 2^23 + u as f32 bits
// (0x4B0000uu), and subtracting 2^23 + o is exact. Signed levels are biased by 128 first.
template <DType T>
__device__ __forceinline__ uint4 octet_bf16(const cuda::Octet& q) {
  using O = Octets<T>;
  constexpr float kBase = 8388608.f + float(O::kSigned ? 128 : O::kOffset);
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const uint32_t word = O::kSigned ? q.lv[i / 4] ^ 0x80808080u : q.lv[i / 4];
    const uint32_t bits = __byte_perm(word, 0x4B000000u, 0x7440u | uint32_t(i % 4));
    v[i] = fmaf(q.s, __uint_as_float(bits) - kBase, q.b);
  }
  uint4 out;
  uint32_t* w = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    w[i] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return out;
}

// raw -> wd: warp w decodes rows w, w + 8, ..., lane o octet o of each (values 8o .. 8o + 8
// of the step; zeros past K).
template <DType T>
__device__ __forceinline__ void decode_step(const TileArgs& a, const uint8_t* raw, bf16* wd, int n0,
                                            int kt) {
  using O = Octets<T>;
  using S = Step<T>;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int kvals = min(kStepK, a.K - kt * kStepK);
#pragma unroll 4
  for (int r = warp; r < kTileN; r += kThreads / 32) {
    const int off = int(reinterpret_cast<uintptr_t>(chunk_of<T>(a, n0 + r, kt)) & 15);
    uint4 v = make_uint4(0, 0, 0, 0);
    if (8 * lane < kvals) {
      const uint8_t* block = raw + r * S::kRawStride + off + (8 * lane / O::kElems) * O::kBytes;
      v = octet_bf16<T>(O::get(block, (8 * lane % O::kElems) / 8));
    }
    *reinterpret_cast<uint4*>(wd + r * kStride + 8 * lane) = v;
  }
}

// acc += wd[warp's 32 rows] · xs[warp's 32 rows]ᵀ over the step's first kvals values, for
// the warp's first `live` 8-column tiles (the rest are x rows past M: zeros, never stored;
// live is warp-uniform, so a 9-row step runs a quarter of a CTA's products).
__device__ __forceinline__ void mma_step(float (&acc)[2][4][4], const bf16* wd, const bf16* xs,
                                         int kvals, int live) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int wn = warp % kWarpsN, wm = warp / kWarpsN;
  // ldmatrix x4 addresses: A's four 8x8 pieces are (rows 0-7 | 8-15) x (k 0-7 | 8-15) in
  // the order a0..a3 of the fragment; B's are rows (m) 0-7 k 0-7, 0-7 k 8-15, 8-15 k 0-7,
  // 8-15 k 8-15: the b0, b1 of two 8-column tiles.
  const uint32_t a_base = smem_addr(wd + (wn * 32 + lane % 16) * kStride + (lane / 16) * 8);
  const uint32_t b_base =
      smem_addr(xs + (wm * 32 + (lane / 16) * 8 + lane % 8) * kStride + ((lane / 8) % 2) * 8);
  for (int kk = 0; kk < kvals; kk += 16) {
    uint32_t af[2][4], bfr[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) ldsm_x4(af[i], a_base + uint32_t((i * 16 * kStride + kk) * 2));
#pragma unroll
    for (int j = 0; j < 2; j++)
      if (2 * j < live) ldsm_x4(bfr[j], b_base + uint32_t((j * 16 * kStride + kk) * 2));
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int t = 0; t < 4; t++)
        if (t < live)
          mma_bf16(acc[i][t], af[i], bfr[t / 2][(t % 2) * 2], bfr[t / 2][(t % 2) * 2 + 1]);
  }
}

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
  using S = Step<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  bf16* wd = reinterpret_cast<bf16*>(smem);
  auto xs = [&](int s) { return reinterpret_cast<bf16*>(smem + S::kWdBytes + s * S::kXsBytes); };
  auto raw = [&](int s) { return smem + S::kWdBytes + kStages * S::kXsBytes + s * S::kRawBytes; };
  cuda::pdl_launch_next();
  const int n0 = int(blockIdx.x) * kTileN, m0 = int(blockIdx.y) * kTileM;
  const int steps = (a.K + kStepK - 1) / kStepK;
  const int kt0 = int(blockIdx.z) * a.steps_per_split;
  const int kt1 = min(steps, kt0 + a.steps_per_split);
  float acc[2][4][4] = {};
  const int live = min(4, max(0, (a.M - m0 - (int(threadIdx.x) / 32 / kWarpsN) * 32 + 7) / 8));
  // The first weights before the wait (no kernel writes them), x after it. plan_splits
  // leaves no split empty; the guard would keep an empty one from reading past K.
  if (kt0 < kt1) load_weights<T>(a, raw(0), n0, kt0);
  cuda::pdl_wait();
  if (kt0 < kt1) load_x(a, xs(0), m0, kt0);
  cp_async_commit();
  for (int kt = kt0; kt < kt1; kt++) {
    const int s = (kt - kt0) % kStages;
    cp_async_wait<0>();
    __syncthreads();  // stage s landed for all; every warp is done with the last step
    if (kt + 1 < kt1) {
      load_weights<T>(a, raw(1 - s), n0, kt + 1);
      load_x(a, xs(1 - s), m0, kt + 1);
    }
    cp_async_commit();
    decode_step<T>(a, raw(s), wd, n0, kt);
    __syncthreads();
    if (live > 0) mma_step(acc, wd, xs(s), min(kStepK, a.K - kt * kStepK), live);
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
