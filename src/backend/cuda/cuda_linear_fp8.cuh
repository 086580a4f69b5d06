// Device-side pieces the FP8 linear kernels share (cuda_linear_fp8.cu, and the wgmma GEMM
// in cuda_gemm_fp8_sm90.cu): how a weight's scales cover it.
#pragma once

#include <cstdint>

namespace tandem::cuda {

// s_w(n, g) of an e4m3 weight [N, K] for output channel n and column group g (block
// weights: g = k / block_k; otherwise g = 0).
struct Fp8WeightScales {
  const float* s = nullptr;  // [1], [N], or [⌈N / block_n⌉, num_k_blocks]
  int kind = 0;              // 0 per tensor, 1 per channel, 2 block
  int64_t block_n = 1, num_k_blocks = 1;
  __device__ __forceinline__ float at(int64_t n, int64_t g) const {
    return kind == 0 ? s[0] : kind == 1 ? s[n] : s[(n / block_n) * num_k_blocks + g];
  }
};

}  // namespace tandem::cuda
