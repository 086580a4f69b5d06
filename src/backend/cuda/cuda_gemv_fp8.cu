// The FP8 weight stream: cuda_gemv.cu's few-row linear (one CTA per SM streaming row groups
// through a ring of shared-memory stages with bulk copies; a producer warp, 16 consumer
// warps) for e4m3 weights, at half the bytes per weight. A stage holds 16 rows of 2048
// columns (still 32 KB); a lane takes 16 weight bytes at a time, widens them to bf16
// exactly (every e4m3 value is a bf16 value) and multiplies them with x. x arrives
// quantized (xq e4m3 and one f32 scale per token, cuda_linear_fp8.cu's quantize kernel)
// and is staged as bf16, exactly xq's values; a row's sum is scaled by s_x[t] · s_w[n] at
// the end. Per-tensor and per-channel weight scales only; block scales take the plain
// stream in cuda_linear_fp8.cu.
//
// Launched with programmatic dependent launch: the producer starts the ring before the
// quantize kernel before it ends (weights are never written by a step); the consumers
// wait before reading xq and its scales.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_mbarrier.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kRowsPerStage = 16;
constexpr int kChunk = 2048;  // columns (bytes) of a row per stage
constexpr int kMaxStages = 8;
constexpr int kCtaSmem = 152 * 1024;  // as cuda_gemv.cu, for the same reasons
constexpr int kThreads = (kRowsPerStage + 1) * 32;
constexpr int kConsumers = kRowsPerStage * 32;
constexpr int kStageBytes = kRowsPerStage * kChunk;
constexpr int kBarrierBytes = 128;
constexpr int kMaxXBytes = 48 * 1024;  // x [M, K] staged as bf16
static_assert((kCtaSmem - kBarrierBytes - kMaxXBytes) / kStageBytes >= 3, "a ring of >= 3 stages");

// acc + Σ w[i]·x[i] over 8 bf16 pairs (both widened to f32 by a shift or a mask).
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
  const uint32_t wu[4] = {w.x, w.y, w.z, w.w}, xu[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    acc = fmaf(__uint_as_float(wu[i] << 16), __uint_as_float(xu[i] << 16), acc);
    acc = fmaf(__uint_as_float(wu[i] & 0xffff0000u), __uint_as_float(xu[i] & 0xffff0000u), acc);
  }
  return acc;
}

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

struct Work {
  int N, K, stages, chunks, group_begin, steps;
};

__device__ __forceinline__ Work cta_work(int N, int K, int stages) {
  Work wk{N, K, stages, (K + kChunk - 1) / kChunk, 0, 0};
  const int64_t groups = (int64_t(N) + kRowsPerStage - 1) / kRowsPerStage;
  wk.group_begin = int(int64_t(blockIdx.x) * groups / gridDim.x);
  const int group_end = int(int64_t(blockIdx.x + 1) * groups / gridDim.x);
  wk.steps = (group_end - wk.group_begin) * wk.chunks;
  return wk;
}

__device__ __forceinline__ void produce(const Work& wk, const uint8_t* w, uint8_t* ring,
                                        uint64_t* full, uint64_t* empty, int lane) {
  for (int i = 0; i < wk.steps; i++) {
    const int slot = i % wk.stages;
    if (i >= wk.stages) cuda::mbar_wait(&empty[slot], uint32_t(i / wk.stages - 1) & 1u);
    const int n0 = (wk.group_begin + i / wk.chunks) * kRowsPerStage;
    const int k0 = (i % wk.chunks) * kChunk;
    const int rows = min(kRowsPerStage, wk.N - n0), cols = min(kChunk, wk.K - k0);
    if (lane == 0) cuda::mbar_arrive_expect(&full[slot], uint32_t(rows * cols));
    __syncwarp();
    if (lane < rows)
      cuda::bulk_copy(ring + slot * kStageBytes + lane * kChunk, w + int64_t(n0 + lane) * wk.K + k0,
                      uint32_t(cols), &full[slot]);
  }
}

//   out [M, N], xq [M, K] e4m3, x_scales [M], w [N, K] e4m3, w_scales [1] or [N],
//   bias [N] or null. K % 16 == 0.
template <int M, typename Out>
__global__ void __launch_bounds__(kThreads)
    gemv_fp8_kernel(Out* __restrict__ out, const uint8_t* __restrict__ xq,
                    const float* __restrict__ x_scales, const uint8_t* __restrict__ w,
                    const float* __restrict__ w_scales, bool per_channel,
                    const bf16* __restrict__ bias, int N, int K, int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kMaxStages;
  uint8_t* ring = smem + kBarrierBytes;
  bf16* xs = reinterpret_cast<bf16*>(ring + stages * kStageBytes);
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; s++) {
      cuda::mbar_init(&full[s], 1);
      cuda::mbar_init(&empty[s], kRowsPerStage);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  cuda::pdl_launch_next();
  const Work wk = cta_work(N, K, stages);
  if (warp == kRowsPerStage) {
    produce(wk, w, ring, full, empty, lane);
    cuda::pdl_wait();
    return;
  }

  cuda::pdl_wait();
  for (int v = int(threadIdx.x); v < M * K / 16; v += kConsumers) {
    uint4 lo, hi;
    cuda::bf16x16_from_f8x16(reinterpret_cast<const uint4*>(xq)[v], lo, hi);
    reinterpret_cast<uint4*>(xs)[2 * v] = lo;
    reinterpret_cast<uint4*>(xs)[2 * v + 1] = hi;
  }
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
  float sx[M];
#pragma unroll
  for (int m = 0; m < M; m++) sx[m] = x_scales[m];

  float acc[M];
#pragma unroll
  for (int m = 0; m < M; m++) acc[m] = 0.f;
  for (int i = 0; i < wk.steps; i++) {
    const int slot = i % stages, chunk = i % wk.chunks;
    const int k0 = chunk * kChunk, cols = min(kChunk, K - k0);
    cuda::mbar_wait(&full[slot], uint32_t(i / stages) & 1u);
    const uint8_t* row = ring + slot * kStageBytes + warp * kChunk;
#pragma unroll
    for (int j = 0; j < kChunk / 512; j++) {  // a lane's 16-byte pieces of the row
      const int k = j * 512 + lane * 16;
      if (k < cols) {
        uint4 lo, hi;
        cuda::bf16x16_from_f8x16(*reinterpret_cast<const uint4*>(row + k), lo, hi);
#pragma unroll
        for (int m = 0; m < M; m++) {
          const uint4* xv = reinterpret_cast<const uint4*>(xs + m * K + k0 + k);
          acc[m] = dot8(hi, xv[1], dot8(lo, xv[0], acc[m]));
        }
      }
    }
    __syncwarp();
    if (lane == 0) cuda::mbar_arrive(&empty[slot]);
    if (chunk == wk.chunks - 1) {
      const int n = (wk.group_begin + i / wk.chunks) * kRowsPerStage + warp;
      const float sw = w_scales[per_channel ? (n < N ? n : 0) : 0];
#pragma unroll
      for (int m = 0; m < M; m++) {
        float s = cuda::warp_sum(acc[m]) * sx[m] * sw;
        acc[m] = 0.f;
        if (bias != nullptr) s += __bfloat162float(bias[n < N ? n : 0]);
        if (lane == 0 && n < N) store_out(out + int64_t(m) * N + n, s);
      }
    }
  }
}

template <int M, typename Out>
void launch(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  const int N = int(a.w->dim(0)), K = int(a.w->dim(1));
  auto* kernel = &gemv_fp8_kernel<M, Out>;
  static std::atomic<uint64_t> smem_ready{0};
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kCtaSmem, smem_ready, "gemv fp8");
  const int x_bytes = M * K * 2;
  const int stages = std::min(kMaxStages, (kCtaSmem - kBarrierBytes - x_bytes) / kStageBytes);
  const int64_t groups = cuda::ceil_div(int64_t(N), int64_t(kRowsPerStage));
  const unsigned grid = unsigned(std::min<int64_t>(groups, be.props().multiProcessorCount));
  const size_t smem = size_t(kBarrierBytes + stages * kStageBytes + x_bytes);
  cuda::launch_pdl("gemv_fp8_kernel", kernel, dim3(grid), dim3(kThreads), smem, be.stream(),
                   out.ptr<Out>(), a.xq->ptr<uint8_t>(), a.x_scales->ptr<float>(),
                   a.w->ptr<uint8_t>(), a.w_scales->ptr<float>(), a.per_channel,
                   a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr, N, K, stages);
}

}  // namespace

bool fp8_gemv_fits(int64_t M, int64_t N, int64_t K, const void* xq, const void* w) {
  return gemv_enabled() && M >= 1 && M <= kGemvMaxRows && K % 16 == 0 && N < (int64_t(1) << 31) &&
         M * K * 2 <= kMaxXBytes && cuda::aligned16(xq) && cuda::aligned16(w);
}

void launch_fp8_gemv(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  static_assert(kGemvMaxRows == 2);
  const bool f32 = out.dtype == DType::F32;
  if (a.xq->rows() == 1)
    f32 ? launch<1, float>(be, out, a) : launch<1, bf16>(be, out, a);
  else
    f32 ? launch<2, float>(be, out, a) : launch<2, bf16>(be, out, a);
}

}  // namespace tandem
