// Device-side helpers shared by the CUDA kernels: f32 <-> storage conversions, 16-byte
// packs (8 bf16 or 4 f32 per load), warp and block reductions, GPU-scope acquire /
// release counters, the MLP activations.
// Arithmetic is always f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace tandem::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(bf16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// Elements of T in one 16-byte pack.
template <typename T>
constexpr int kPack = int(16 / sizeof(T));

// v[0, kPack<T>) = p[0, kPack<T>) as f32. p must be 16-byte aligned.
template <typename T>
__device__ __forceinline__ void load_pack(const T* p, float* v) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
  for (int i = 0; i < kPack<T>; i++) v[i] = to_f32(e[i]);
}

// p[0, kPack<T>) = v rounded to T. p must be 16-byte aligned.
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const float* v) {
  uint4 u;
  T* e = reinterpret_cast<T*>(&u);
#pragma unroll
  for (int i = 0; i < kPack<T>; i++) e[i] = from_f32<T>(v[i]);
  *reinterpret_cast<uint4*>(p) = u;
}

// v[0, N) = p[0, N) as f32. With kVec, p is 16-byte aligned and N a multiple of the
// pack, and the loads are 16 bytes wide; otherwise element by element.
template <int N, bool kVec, typename T>
__device__ __forceinline__ void load_n(const T* p, float* v) {
  if constexpr (kVec && N % kPack<T> == 0) {
#pragma unroll
    for (int j = 0; j < N; j += kPack<T>) load_pack(p + j, v + j);
  } else {
#pragma unroll
    for (int j = 0; j < N; j++) v[j] = to_f32(p[j]);
  }
}

// p[0, N) = v rounded to T; the same rules as load_n.
template <int N, bool kVec, typename T>
__device__ __forceinline__ void store_n(T* p, const float* v) {
  if constexpr (kVec && N % kPack<T> == 0) {
#pragma unroll
    for (int j = 0; j < N; j += kPack<T>) store_pack(p + j, v + j);
  } else {
#pragma unroll
    for (int j = 0; j < N; j++) p[j] = from_f32<T>(v[j]);
  }
}

// The last i in [0, n) with sorted[i] <= v (0 when there is none), by bisection over a
// non-decreasing array: the row whose start is at or before a token, the expert whose
// first tile is at or before a tile.
__device__ __forceinline__ int last_at_most(const int32_t* sorted, int n, int v) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (sorted[mid] <= v)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over the block with the warp reduction `warp_op` (warp_sum, warp_max; blockDim.x
// a multiple of 32, <= 1024); every thread gets the result. `scratch` holds 32 floats of
// shared memory; the call ends with a barrier-safe read.
template <typename WarpOp>
__device__ __forceinline__ float block_reduce(float v, float* scratch, WarpOp warp_op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_op(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int num_warps = int(blockDim.x) >> 5;
  v = lane < num_warps ? scratch[lane] : 0.f;
  return warp_op(v);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, [](float x) { return warp_sum(x); });
}

// Of values >= 0 (|x|, amax): a block of fewer than 32 warps fills the rest with 0.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, [](float x) { return warp_max(x); });
}

// GPU-scope acquire / release on an int in global memory, for the counters with which the
// CTAs of a split merge their parts (the decode attention, the FP8 wgmma GEMM): the old
// value of an acq_rel add, and an acquiring load.
__device__ __forceinline__ int atomic_add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n"
               : "=r"(old)
               : "l"(p), "r"(v)
               : "memory");
  return old;
}
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// torch.nn.functional.silu, as the CPU twin computes it: x / (1 + e^-x).
__device__ __forceinline__ float silu(float x) {
  return x / (1.f + expf(-x));
}

// torch gelu(approximate="tanh").
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

template <Activation A>
__device__ __forceinline__ float activate(float x) {
  if constexpr (A == Activation::SiLU)
    return silu(x);
  else
    return gelu_tanh(x);
}

}  // namespace tandem::cuda
