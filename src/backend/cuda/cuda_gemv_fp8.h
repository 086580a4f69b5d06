// The FP8 weight stream for linears of 1 to 8 rows: cuda_gemv_fp8.cu. Host header.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_weight_scales.h"

namespace tandem {

class CudaBackend;

// Rows of x the stream takes: the tensor-core mma's 8 columns.
inline constexpr int kFp8GemvMaxRows = 8;

struct Fp8GemvArgs {
  const Tensor* x;              // [M, K] bf16, quantized by the kernel
  const float* static_scale;    // [1] (a static input scale, on the device) or null: dynamic
  const Tensor* w;              // [N, K] e4m3
  cuda::WeightScales w_scales;  // Block: [block_n, 128] blocks (fp8_gemv_fits)
  const Tensor* bias;           // [N] bf16 or undefined
};

// Whether the stream takes the shape (1–8 rows, K % 16 == 0, x small enough to stage,
// block scales (if any) 128 columns wide, 16-byte aligned). block_k: 0 without block
// scales. Whether the weight streams are switched on is the caller's (CudaOptions::gemv).
bool fp8_gemv_fits(int64_t M, int64_t N, int64_t K, int64_t block_k, const void* x, const void* w);
// Launches it (the caller validated shapes, dtypes and fp8_gemv_fits).
void launch_fp8_gemv(CudaBackend& be, Tensor& out, const Fp8GemvArgs& args);

}  // namespace tandem
