// The k-quant weight-stream variants (backend/gguf_gemv.h; cuda_block_gemv_split.cu). Host
// header, safe for nvcc and g++.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// x quantized for the weight streams (cuda_block_linear.cu's quantize_x_kernel):
//   xq [rows, K] int8, dx [rows, K / 32] each 32 values' scale, xs [rows, K / 8] d · Σ q of
//   each octet.
struct GemvX {
  const int8_t* xq;
  const float* dx;
  const float* xs;
  int rows;  // 1 .. 8
};

// out [rows, N] = x · W'ᵀ (+ bias) on variant `variant` (1 .. 4) when it covers w's dtype
// (Q4_K, Q5_K, Q6_K); false, launching nothing, otherwise (the caller runs variant 0).
// Validation is the caller's (block_linear).
bool gemv_split(CudaBackend& be, int variant, Tensor& out, const Tensor& w, const GemvX& x,
                const Tensor& bias);

}  // namespace tandem
