// The split-K weight stream of 1–2 row k-quant linears (cuda_block_gemv_split.cu). Host
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

inline constexpr int kSplitMaxRows = 2;  // the rows the split stream takes (measured)

// out [rows, N] = x · W'ᵀ (+ bias) when rows <= kSplitMaxRows and w's dtype is Q4_K, Q5_K or
// Q6_K; false, launching nothing, otherwise (the caller runs the warp stream).
// Validation is the caller's (block_linear).
bool gemv_split(CudaBackend& be, Tensor& out, const Tensor& w, const GemvX& x,
                const Tensor& bias);

}  // namespace tandem
