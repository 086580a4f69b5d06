// Three candidate FP8 weight streams for 1–8 row linears beside the ring of cuda_gemv_fp8.cu
// (issue 45: FP8 decode-b1 near its roofline), chosen per backend by CudaOptions::fp8_stream
// (TANDEM_FP8_STREAM) until a GPU measures them (bench/cuda_fp8_bench stream,
// scripts/gpu_wave.sh fp8-stream). Same arithmetic as the ring: x quantized per token with
// the CPU twin's f64 arithmetic (or the static scale), e4m3 x e4m3 products on the tensor
// cores (mma.m16n8k32: 16 weight rows by up to 8 tokens), f32 sums, then
// out = sum · s_x[m] · s_w(n) (+ bias). Per-channel and per-tensor weight scales only.
//
// All three read weights straight from global memory in 16-byte loads, no producer warp, no
// mbarriers: lane (g, c) of a warp takes bytes [16c, 16c + 16) of a 64-column segment in
// rows g and g + 8 of a 16-row group, the two mmas' A fragments (the k-slot order A and B
// agree on, as in the ring's mma_stage), and each warp loads kBatch segments before it
// multiplies them (kBatch KB of a warp's weights in flight).
//   Direct: the ring's CTA geometry (one CTA per SM, 16 warps, a contiguous run of row
//     groups, x quantized into shared memory by every CTA: cuda_stream_input.cuh), the
//     warps interleaved over a group's segments; the first batch of weights is loaded
//     before the wait on the kernel before (PDL), so it is in flight while x is quantized.
//   Deep: Direct with each warp's next batch loaded before it multiplies the current one
//     (8 KB a warp in flight; 109 registers a thread against Direct's 64 with 28 bytes of
//     spills: a Deep CTA leaves an SM 8 K registers, too few for a decode-attention CTA).
//   Split: many small CTAs (4 warps), each 16 rows by a 1/S slice of K; the S CTAs of a row
//     group are one thread-block cluster and add their sums through distributed shared
//     memory in rank order. x is quantized by the quantize kernel before it (PDL: the split
//     CTAs load their first weights while it runs), so no CTA reads more of x than its slice.
// Every sum is taken in a fixed order: all three are deterministic run to run.
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_linear_fp8.cuh"
#include "backend/cuda/cuda_pdl.cuh"
#include "backend/cuda/cuda_stream_input.cuh"
#include "backend/cuda/cuda_weight_stream.cuh"

namespace tandem {

namespace {

using cuda::bf16;
namespace cg = cooperative_groups;

constexpr int kRows = 16;  // weight rows of a group: the mma's rows
constexpr int kSeg = 64;   // columns of a segment: a warp's two mmas
constexpr int kBatch = 4;  // segments a warp loads before it multiplies them
constexpr int kMaxRows = kFp8GemvMaxRows;
constexpr int kDirectWarps = cuda::kStreamConsumerWarps;  // 512 threads: quantize_x's
constexpr int kSplitWarps = 4;
constexpr int kMaxSplits = 8;  // the portable cluster size

// 16 bytes of a weight, read once: not kept in L1.
__device__ __forceinline__ uint4 load_weight16(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// A warp's batch: rows g and g + 8 of row group `group`, segments seg0 + j · stride
// (j < kBatch) that are below seg_end; zeros elsewhere (rows past N, columns past K).
struct Batch {
  uint4 a[kBatch], b[kBatch];

  __device__ __forceinline__ void load(const uint8_t* w, int N, int K, int group, int seg0,
                                       int stride, int seg_end, int lane) {
    const int g = lane >> 2, c = lane & 3;
    const int n0 = group * kRows + g, n1 = n0 + 8;
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kBatch; j++) {
      const int seg = seg0 + j * stride, k = seg * kSeg + c * 16;
      const bool in = seg < seg_end && k < K;
      a[j] = in && n0 < N ? load_weight16(w + int64_t(n0) * K + k) : zero;
      b[j] = in && n1 < N ? load_weight16(w + int64_t(n1) * K + k) : zero;
    }
  }

  // d += the batch's rows · x's tokens, x [M, K] e4m3 at `x` (shared or global memory).
  // Segments at or past seg_end are skipped (warp-uniform: the mma needs every lane).
  __device__ __forceinline__ void multiply(float (&d)[4], const uint8_t* x, int M, int K, int seg0,
                                           int stride, int seg_end, int lane) const {
    const int g = lane >> 2, c = lane & 3;
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kBatch; j++) {
      const int seg = seg0 + j * stride, k = seg * kSeg + c * 16;
      if (seg >= seg_end) continue;
      const uint4 xv = g < M && k < K ? *reinterpret_cast<const uint4*>(x + g * K + k) : zero;
      cuda::mma_e4m3(d, a[j].x, b[j].x, a[j].y, b[j].y, xv.x, xv.y);
      cuda::mma_e4m3(d, a[j].z, b[j].z, a[j].w, b[j].w, xv.z, xv.w);
    }
  }
};

// A warp's sums (rows g, g + 8; tokens 2c, 2c + 1) into red [M][16][warps] at `warp`.
__device__ __forceinline__ void park(float* red, const float (&d)[4], int M, int warps, int warp,
                                     int lane) {
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int m = 2 * c + (j & 1), row = g + (j >> 1) * 8;
    if (m < M) red[(m * kRows + row) * warps + warp] = d[j];
  }
}

template <typename Out>
__device__ __forceinline__ void store_scaled(Out* out, float s, float sx, cuda::WeightScales ws,
                                             const bf16* bias, int m, int n, int N) {
  s *= sx * ws.at<int>(n, 0);
  if (bias != nullptr) s += __bfloat162float(bias[n]);
  if constexpr (std::is_same_v<Out, float>)
    out[int64_t(m) * N + n] = s;
  else
    out[int64_t(m) * N + n] = __float2bfloat16_rn(s);
}

// ---------------------------------------------------------------- Direct

// The end of a row group: the 16 warps' sums into red (this group's parity half: one barrier
// a group suffices), then thread t < M · 16 adds row t % 16's for token t / 16 and stores.
template <typename Out>
__device__ __forceinline__ void finish_group(Out* out, float* red, float (&d)[4], const double* sx,
                                             cuda::WeightScales ws, const bf16* bias, int M, int N,
                                             int group, int warp, int lane) {
  float* r = red + (group & 1) * (M * kRows * kDirectWarps);
  park(r, d, M, kDirectWarps, warp, lane);
  d[0] = d[1] = d[2] = d[3] = 0.f;
  __syncthreads();
  const int t = int(threadIdx.x), m = t / kRows, n = group * kRows + t % kRows;
  if (t >= M * kRows || n >= N) return;
  const float4* p = reinterpret_cast<const float4*>(r + t * kDirectWarps);
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < kDirectWarps / 4; q++) {
    const float4 v = p[q];
    s += (v.x + v.y) + (v.z + v.w);
  }
  store_scaled(out, s, float(sx[m]), ws, bias, m, n, N);
}

//   out [M, N], x from `in` ([M, K] bf16), w [N, K] e4m3, bias [N] or null. K % 16 == 0.
//   Dynamic shared memory: xs [M, K] e4m3, then red [2 group parities][M][16][16 warps].
//   kDeep: the warp's next batch is loaded before it multiplies the current one (two
//   batches, 8 KB a warp, in flight; Deep), else after (Direct).
template <typename Out, bool kDeep>
__global__ void __launch_bounds__(kDirectWarps * 32, kDeep ? 1 : 2)
    gemv_fp8_direct_kernel(Out* __restrict__ out, cuda::StreamInput in,
                           const uint8_t* __restrict__ w, cuda::WeightScales ws,
                           const bf16* __restrict__ bias, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double sx[kMaxRows];
  __shared__ float sinv[kMaxRows], scratch[kMaxRows * kDirectWarps], rows[kMaxRows];
  uint8_t* xs = smem;
  float* red = reinterpret_cast<float*>(smem + ((M * K + 15) & ~15));
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int groups = (N + kRows - 1) / kRows, segs = (K + kSeg - 1) / kSeg;
  int group = int(int64_t(blockIdx.x) * groups / gridDim.x);
  const int group_end = int(int64_t(blockIdx.x + 1) * groups / gridDim.x);
  constexpr int kPerBatch = kBatch * kDirectWarps;  // segments a batch of the CTA covers
  const int batches = (segs + kPerBatch - 1) / kPerBatch;
  cuda::pdl_launch_next();
  Batch bt, next;
  bt.load(w, N, K, group, warp, kDirectWarps, segs, lane);  // weights: before the wait
  cuda::pdl_wait();
  cuda::quantize_x(xs, sx, sinv, scratch, rows, in, M, K, 1);
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int b = 0;;) {
    const bool last = b + 1 == batches;  // of the group
    const int nb = last ? 0 : b + 1, ng = last ? group + 1 : group;
    if constexpr (kDeep)
      if (ng < group_end) next.load(w, N, K, ng, warp + nb * kPerBatch, kDirectWarps, segs, lane);
    bt.multiply(d, xs, M, K, warp + b * kPerBatch, kDirectWarps, segs, lane);
    if (last) finish_group(out, red, d, sx, ws, bias, M, N, group, warp, lane);
    if (ng >= group_end) break;
    if constexpr (kDeep)
      bt = next;
    else
      bt.load(w, N, K, ng, warp + nb * kPerBatch, kDirectWarps, segs, lane);
    b = nb;
    group = ng;
  }
}

template <typename Out, bool kDeep>
void launch_direct(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  const int M = int(a.x->rows()), N = int(a.w->dim(0)), K = int(a.w->dim(1));
  static std::atomic<uint64_t> smem_ready{0};
  const auto kernel = &gemv_fp8_direct_kernel<Out, kDeep>;
  // The ring's footprint, so that one CTA a SM hands each SM from one linear to the next
  // (cuda_gemv.cu, the top) whatever x needs.
  const int smem = cuda::kStreamCtaSmem - 2048;
  static_assert(32 * 1024 + 2 * kMaxRows * kRows * kDirectWarps * 4 + 16 <=
                    cuda::kStreamCtaSmem - 2048 - 4096,
                "x, the sums and the static arrays fit");
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, smem_ready,
                           "gemv_fp8_direct_kernel");
  const int64_t groups = cuda::ceil_div(N, kRows);
  const unsigned grid = unsigned(std::min<int64_t>(groups, be.props().multiProcessorCount));
  cuda::launch_pdl("gemv_fp8_direct_kernel", kernel, dim3(grid), dim3(kDirectWarps * 32),
                   size_t(smem), be.stream(), out.ptr<Out>(),
                   cuda::StreamInput{a.x->ptr<bf16>(), a.static_scale}, a.w->ptr<uint8_t>(),
                   a.w_scales, a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr, M, N,
                   K);
}

// ---------------------------------------------------------------- Split

//   out [M, N], xq [M, K] e4m3 with scales xs [M] (the quantize kernel's), w [N, K] e4m3,
//   bias [N] or null. Cluster rank r of row group blockIdx.x / S takes segments
//   [r · per_split, (r + 1) · per_split) of K's 64-column segments.
template <typename Out>
__global__ void __launch_bounds__(kSplitWarps * 32)
    gemv_fp8_split_kernel(Out* __restrict__ out, const uint8_t* __restrict__ xq,
                          const float* __restrict__ xs, const uint8_t* __restrict__ w,
                          cuda::WeightScales ws, const bf16* __restrict__ bias, int M, int N, int K,
                          int per_split) {
  __shared__ __align__(16) float red[kMaxRows * kRows * kSplitWarps];
  __shared__ float part[kMaxRows * kRows];
  cg::cluster_group cluster = cg::this_cluster();
  const int S = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int group = int(blockIdx.x) / S;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int segs = (K + kSeg - 1) / kSeg, seg_begin = rank * per_split;
  const int seg_end = min(segs, seg_begin + per_split);
  constexpr int kPerBatch = kBatch * kSplitWarps;
  const int batches = (per_split + kPerBatch - 1) / kPerBatch;
  cuda::pdl_launch_next();
  Batch bt;
  bt.load(w, N, K, group, seg_begin + warp, kSplitWarps, seg_end, lane);  // before the wait
  cuda::pdl_wait();
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int b = 0; b < batches; b++) {
    const int seg0 = seg_begin + warp + b * kPerBatch;
    if (b > 0) bt.load(w, N, K, group, seg0, kSplitWarps, seg_end, lane);
    bt.multiply(d, xq, M, K, seg0, kSplitWarps, seg_end, lane);
  }
  park(red, d, M, kSplitWarps, warp, lane);
  __syncthreads();
  const int t = int(threadIdx.x);
  if (t < M * kRows) {
    const float4 v = *reinterpret_cast<const float4*>(red + t * kSplitWarps);
    part[t] = (v.x + v.y) + (v.z + v.w);
  }
  cluster.sync();  // every rank's part is written
  if (rank == 0 && t < M * kRows) {
    const int m = t / kRows, n = group * kRows + t % kRows;
    float s = 0.f;
    for (int r = 0; r < S; r++) s += cluster.map_shared_rank(part, r)[t];  // in rank order
    if (n < N) store_scaled(out, s, xs[m], ws, bias, m, n, N);
  }
  cluster.sync();  // no CTA leaves while rank 0 reads its part
}

template <typename Out>
void launch_split(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  const int64_t M = a.x->rows(), N = a.w->dim(0), K = a.w->dim(1);
  Tensor xq = be.alloc(DType::F8E4M3, {M, K}), scales = be.alloc(DType::F32, {M, 1});
  cuda::launch_quantize_rows(be.stream(), xq.ptr<uint8_t>(), scales.ptr<float>(), a.x->ptr<bf16>(),
                             M, K, K, a.static_scale);
  const int S = fp8_split_count(N, K, be.props().multiProcessorCount);
  const int per_split = int(cuda::ceil_div(cuda::ceil_div(K, kSeg), S));
  cudaLaunchAttribute attrs[2] = {};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = unsigned(S);
  attrs[0].val.clusterDim.y = attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(cuda::ceil_div(N, kRows) * S));
  config.blockDim = dim3(kSplitWarps * 32);
  config.stream = be.stream();
  config.attrs = attrs;
  config.numAttrs = cuda::pdl_enabled() ? 2 : 1;
  cuda_check(cudaLaunchKernelEx(&config, &gemv_fp8_split_kernel<Out>, out.ptr<Out>(),
                                static_cast<const uint8_t*>(xq.ptr<uint8_t>()),
                                static_cast<const float*>(scales.ptr<float>()),
                                static_cast<const uint8_t*>(a.w->ptr<uint8_t>()), a.w_scales,
                                static_cast<const bf16*>(
                                    a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr),
                                int(M), int(N), int(K), per_split),
             "gemv_fp8_split_kernel");
}

}  // namespace

int fp8_split_count(int64_t N, int64_t K, int sms) {
  const int64_t groups = cuda::ceil_div(N, kRows), segs = cuda::ceil_div(K, kSeg);
  int S = 1;
  while (S < kMaxSplits && groups * S < 4 * int64_t(sms) && segs >= 2 * S * kBatch) S *= 2;
  return S;
}

void launch_fp8_gemv_direct(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a, bool deep) {
  if (out.dtype == DType::F32)
    return deep ? launch_direct<float, true>(be, out, a) : launch_direct<float, false>(be, out, a);
  if (deep) return launch_direct<bf16, true>(be, out, a);
  launch_direct<bf16, false>(be, out, a);
}

void launch_fp8_gemv_split(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  if (out.dtype == DType::F32) return launch_split<float>(be, out, a);
  launch_split<bf16>(be, out, a);
}

}  // namespace tandem
