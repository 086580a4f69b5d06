// The few-row linear as a weight stream: out [M, N] = x [M, K] · w [N, K]ᵀ (+ bias) for
// M <= 2, the GEMMs of a decode step of a few sequences. At that M a linear reads each
// weight once and does 2·M flops per weight, so it runs at the speed of HBM, and what
// decides its time is how early the weight bytes start moving and how fully the stream
// keeps HBM busy to the end.
//
// Shape of the kernel: one CTA per SM owns a contiguous run of row groups (16 weight rows
// each) and streams them through a ring of 32 KB shared-memory stages with 1-D bulk copies
// (cp.async.bulk, completion on an mbarrier). One producer warp issues the copies, a row
// of kChunk columns per lane; 16 consumer warps each take one row of a stage and keep an
// f32 sum per row of x, reduced across the warp when the row's last chunk is done. x is
// staged once per CTA in shared memory as bf16.
//
// A CTA takes 152 KB of shared memory; its ring fills what x leaves (96–128 KB), still
// more weight bytes in flight than HBM's latency needs. The size is set from both sides:
// - more than half an SM, so no second CTA of any GEMV fits beside it. With smaller CTAs
//   the next GEMV's CTAs, launched early, landed two or three on some SMs and none on
//   others, and the SMs with three set the pace. One CTA per SM hands each SM from one
//   GEMV to the next as its CTA ends.
// - small enough that a few-token decode-attention CTA (72 KB at Dh 128,
//   cuda_attention_decode.cu) fits beside it, so attention neither waits for the qkv
//   linear's CTAs to leave nor keeps the o projection's CTAs off the SMs it runs on.
//
// Not for more rows: at M = 4 each weight byte costs four shared-memory reads of x and
// their conversions, and the SM's issue and shared-memory bandwidth, not HBM, set the pace.
// cuBLASLt's tensor-core kernels take M >= 3.
//
// The measurements behind each choice, and what was tried and not kept (the gated
// activation staged in each CTA, among others): bench/RESULTS.md (session 6, and "Moved
// from the kernel files (house issue)").
//
// Launched with programmatic dependent launch (cuda_pdl.cuh): the producer fills the ring
// before anything waits on the kernel before, since weights are never written by a
// step. The consumers wait (pdl_wait) before they read x or write out. So a GEMV after a
// norm, RoPE or attention kernel has its first 96–128 KB per SM in flight while that
// kernel still runs.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_weight_stream.cuh"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kChunk = 1024;  // columns of a row per stage: 2 KB
using Ring = cuda::WeightRing<bf16, kChunk>;
constexpr int kMaxXBytes = 48 * 1024;  // x [M, K] staged as bf16
static_assert((cuda::kStreamCtaSmem - cuda::kStreamBarrierBytes - kMaxXBytes) / Ring::kStageBytes >=
                  3,
              "a ring of >= 3 stages");

// acc + Σ w[i]·x[i] over 8 bf16 pairs; a bf16 widens to f32 by a shift or a mask.
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
  const uint32_t wu[4] = {w.x, w.y, w.z, w.w}, xu[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    acc = fmaf(__uint_as_float(wu[i] << 16), __uint_as_float(xu[i] << 16), acc);
    acc = fmaf(__uint_as_float(wu[i] & 0xffff0000u), __uint_as_float(xu[i] & 0xffff0000u), acc);
  }
  return acc;
}

__device__ __forceinline__ void store_out(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store_out(bf16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

//   out [M, N], x [M, K], w [N, K], bias [N] or null. K % 8 == 0.
//   Dynamic shared memory: the ring (cuda_weight_stream.cuh), then x.
template <int M, typename Out>
__global__ void __launch_bounds__(cuda::kStreamThreads)
    gemv_kernel(Out* __restrict__ out, const bf16* __restrict__ x, const bf16* __restrict__ w,
                const bf16* __restrict__ bias, int N, int K, int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  Ring ring;
  if (!cuda::open_weight_stream(ring, smem, w, N, K, stages)) return;  // the producer
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  bf16* xs = reinterpret_cast<bf16*>(ring.end());
  for (int v = int(threadIdx.x); v < M * K / 8; v += cuda::kStreamConsumers)
    reinterpret_cast<uint4*>(xs)[v] = reinterpret_cast<const uint4*>(x)[v];
  asm volatile("bar.sync 1, %0;" ::"n"(cuda::kStreamConsumers) : "memory");

  const cuda::StreamWork& wk = ring.wk;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; m++) acc[m] = 0.f;
  for (int i = 0; i < wk.steps; i++) {
    const int chunk = i % wk.chunks;
    const int k0 = chunk * kChunk, cols = min(kChunk, K - k0);
    const bf16* row = ring.wait(i) + warp * kChunk;
#pragma unroll
    for (int j = 0; j < kChunk / 256; j++) {  // a lane's 16-byte pieces of the row
      const int k = j * 256 + lane * 8;
      if (k < cols) {
        const uint4 wv = *reinterpret_cast<const uint4*>(row + k);
#pragma unroll
        for (int m = 0; m < M; m++)
          acc[m] = dot8(wv, *reinterpret_cast<const uint4*>(xs + m * K + k0 + k), acc[m]);
      }
    }
    ring.release(i, lane);
    if (chunk == wk.chunks - 1) {
      const int n = (wk.group_begin + i / wk.chunks) * cuda::kStreamRows + warp;
#pragma unroll
      for (int m = 0; m < M; m++) {
        float s = cuda::warp_sum(acc[m]);
        acc[m] = 0.f;
        if (bias != nullptr) s += __bfloat162float(bias[n < N ? n : 0]);
        if (lane == 0 && n < N) store_out(out + int64_t(m) * N + n, s);
      }
    }
  }
}

template <int M, typename Out>
void launch(CudaBackend& be, Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int N = int(w.dim(0)), K = int(w.dim(1));
  static std::atomic<uint64_t> smem_ready{0};
  const int x_bytes = M * K * 2;
  const int stages = int(cuda::stream_ring_stages(x_bytes, Ring::kStageBytes));
  cuda::launch_weight_stream("gemv_kernel", &gemv_kernel<M, Out>, smem_ready, be, N, stages,
                             Ring::kStageBytes, x_bytes, out.ptr<Out>(), x.ptr<bf16>(),
                             w.ptr<bf16>(), bias.defined() ? bias.ptr<bf16>() : nullptr, N, K,
                             stages);
}

// Dispatch on the rows (1 or 2) and the output dtype.
void launch_any(CudaBackend& be, Tensor& out, const Tensor& x, const Tensor& w,
                const Tensor& bias) {
  static_assert(kGemvMaxRows == 2);
  const bool f32 = out.dtype == DType::F32;
  if (x.rows() == 1)
    f32 ? launch<1, float>(be, out, x, w, bias) : launch<1, bf16>(be, out, x, w, bias);
  else
    f32 ? launch<2, float>(be, out, x, w, bias) : launch<2, bf16>(be, out, x, w, bias);
}

// Whether the stream takes M rows of K columns (the staged x is [M, K]).
bool fits(const CudaBackend& be, const Tensor& x, const Tensor& w) {
  const int64_t M = x.rows(), K = w.dim(1), N = w.dim(0);
  return be.options().gemv && M >= 1 && M <= kGemvMaxRows && K % 8 == 0 && N < (int64_t(1) << 31) &&
         M * K * 2 <= kMaxXBytes && cuda::aligned16(x.data) && cuda::aligned16(w.data);
}

}  // namespace

bool try_gemv(CudaBackend& backend, Tensor& out, const Tensor& x, const Tensor& w,
              const Tensor& bias) {
  if (!fits(backend, x, w)) return false;
  launch_any(backend, out, x, w, bias);
  return true;
}

}  // namespace tandem
