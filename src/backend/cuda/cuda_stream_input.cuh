// The FP8 weight stream's input stage (cuda_gemv_fp8.cu): every CTA's consumers quantize
// the step's x [M, K] (bf16) into shared memory as e4m3, with its scales, before the
// products.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_weight_stream.cuh"

namespace tandem::cuda {

inline constexpr int kStreamBlockK = 128;  // block weights: x scaled per token and 128 columns

// Where x comes from.
struct StreamInput {
  const __nv_bfloat16* src = nullptr;  // x [M, K]
  const float* static_x = nullptr;     // a static input scale [1], or null: dynamic
};

// The 8 values x[m, k .. k + 8) (k % 8 == 0).
__device__ __forceinline__ void load_x8(const StreamInput& in, int m, int K, int k, float (&v)[8]) {
  load_n<8, true>(in.src + int64_t(m) * K + k, v);
}

// s = max(amax, 1e-12) / 448 in f64 for x's entry p, and 1 / s for the f32 fast path.
__device__ __forceinline__ void set_x_scale(double* sx, float* sinv, int p, float amax) {
  sx[p] = fmax(double(amax), 1e-12) / 448.0;
  sinv[p] = float(1.0 / sx[p]);
}

// Per token m, over every consumer thread: op-reduction of f(8 values) over the row's K
// values, across the warps through scratch [M][kStreamConsumerWarps]; thread m < M writes
// row m's result to out[m] (no barrier after it: only that thread may read it at once).
template <typename F, typename Op>
__device__ __forceinline__ void per_token(const StreamInput& in, int M, int K, float* scratch,
                                          float* out, F f, Op op) {
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  for (int m = 0; m < M; m++) {
    float acc = 0.f;
    for (int v = tid; v < K / 8; v += kStreamConsumers) {
      float x[8];
      load_x8(in, m, K, v * 8, x);
      acc = op(acc, f(x));
    }
    for (int o = 16; o > 0; o >>= 1) acc = op(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if (lane == 0) scratch[m * kStreamConsumerWarps + warp] = acc;
  }
  asm volatile("bar.sync 1, %0;" ::"n"(kStreamConsumers) : "memory");
  if (tid < M) {
    float acc = 0.f;
    for (int w = 0; w < kStreamConsumerWarps; w++)
      acc = op(acc, scratch[tid * kStreamConsumerWarps + w]);
    out[tid] = acc;
  }
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Consumers: xs [M, K] = e4m3(x / s_x), s_x per token (G = 1) or per token and 128
// columns (G = ⌈K / 128⌉) in sx[m · G + g]: the static input scale, or max(|x|, 1e-12) /
// 448, in f64, the quotients as f64 ones (cuda::f8_quotient). amax is a max, so every
// CTA finds the same one. scratch [M · kStreamConsumerWarps]; rows [M].
__device__ __forceinline__ void quantize_x(uint8_t* xs, double* sx, float* sinv, float* scratch,
                                           float* rows, const StreamInput& in, int M, int K,
                                           int G) {
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int group = G == 1 ? K : kStreamBlockK;
  auto amax8 = [](const float(&x)[8]) {
    float a = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
  };
  if (in.static_x != nullptr) {
    if (tid < M) {
      sx[tid] = double(*in.static_x);
      sinv[tid] = float(1.0 / sx[tid]);
    }
  } else if (G == 1) {  // a token's amax over all threads
    per_token(in, M, K, scratch, rows, amax8, MaxOp{});
    if (tid < M) set_x_scale(sx, sinv, tid, rows[tid]);
  } else {  // a warp per (token, 128 columns): 16 lanes of 8
    for (int p = warp; p < M * G; p += kStreamConsumerWarps) {
      const int m = p / G, k = (p % G) * kStreamBlockK + lane * 8;
      float amax = 0.f;
      if (lane < kStreamBlockK / 8 && k < K) {
        float x[8];
        load_x8(in, m, K, k, x);
        amax = amax8(x);
      }
      amax = warp_max(amax);
      if (lane == 0) set_x_scale(sx, sinv, p, amax);
    }
  }
  asm volatile("bar.sync 1, %0;" ::"n"(kStreamConsumers) : "memory");
  for (int v = tid; v < M * K / 8; v += kStreamConsumers) {
    const int m = v * 8 / K, k = v * 8 - m * K, p = m * G + k / group;
    const double s = sx[p];
    const float inv = sinv[p];
    float x[8];
    load_x8(in, m, K, k, x);
    uint32_t q[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; i++) q[i / 4] |= uint32_t(f8_quotient(x[i], s, inv)) << (8 * (i % 4));
    reinterpret_cast<uint2*>(xs)[v] = make_uint2(q[0], q[1]);
  }
  asm volatile("bar.sync 1, %0;" ::"n"(kStreamConsumers) : "memory");
}

}  // namespace tandem::cuda
