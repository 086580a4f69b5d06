// How an FP8 weight's scales cover it, for every FP8 kernel: one descriptor over
// linear.h's ScaleGranularity. Safe for nvcc and g++ (the host-side launch arguments carry it).
#pragma once

#include <cuda_runtime.h>  // __host__, __device__, __forceinline__ (empty for g++)

#include <cstdint>
#include <type_traits>

#include "backend/linear.h"

namespace tandem::cuda {

// s_w(n, kb) of an e4m3 weight [N, K] for output channel n and column block kb (Block:
// kb = k / block_k; otherwise kb is unused): the one description of a weight's scales for
// every FP8 kernel (the linears, the weight stream, the wgmma GEMM, the experts).
struct WeightScales {
  const float* s = nullptr;  // [1], [N], or [⌈N / block_n⌉, num_k_blocks], by granularity
  ScaleGranularity granularity = ScaleGranularity::PerTensor;
  int64_t block_n = 1, num_k_blocks = 1;  // Block only

  // Indices in I: int64_t by default, int where a kernel's indices are int (the weight
  // stream), so neither pays the other's arithmetic.
  template <typename I = int64_t>
  __device__ __forceinline__ float at(std::type_identity_t<I> n, std::type_identity_t<I> kb) const {
    return granularity == ScaleGranularity::PerTensor ? s[0]
           : granularity == ScaleGranularity::PerChannel
               ? s[n]
               : s[(n / I(block_n)) * I(num_k_blocks) + kb];
  }
  __host__ __device__ bool per_channel() const {
    return granularity == ScaleGranularity::PerChannel;
  }
  __host__ __device__ bool block() const { return granularity == ScaleGranularity::Block; }
  // How many values `s` holds for a weight of N rows.
  int64_t count(int64_t N) const {
    return granularity == ScaleGranularity::PerTensor ? 1
           : granularity == ScaleGranularity::PerChannel
               ? N
               : (N + block_n - 1) / block_n * num_k_blocks;
  }
};

// The scales of a weight of K columns quantized as `q` (block sizes positive for Block).
inline WeightScales weight_scales(const LinearQuant& q, int64_t K) {
  const bool block = q.granularity == ScaleGranularity::Block;
  return WeightScales{q.weight_scale.ptr<float>(), q.granularity, block ? q.block_n : 1,
                      block ? (K + q.block_k - 1) / q.block_k : 1};
}

}  // namespace tandem::cuda
