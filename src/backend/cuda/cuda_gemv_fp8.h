// The FP8 weight stream for 1–2 row linears: cuda_gemv_fp8.cu. Host header.
#pragma once

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

struct Fp8GemvArgs {
  const Tensor* xq;        // [M, K] e4m3, x quantized per token
  const Tensor* x_scales;  // [M] f32
  const Tensor* w;         // [N, K] e4m3
  const Tensor* w_scales;  // [1] or [N] f32
  bool per_channel;
  const Tensor* bias;      // [N] bf16 or undefined
};

// Whether the stream takes the shape (1–2 rows, K % 16 == 0, x small enough to stage,
// 16-byte aligned, the weight stream switch on: gemv_enabled()).
bool fp8_gemv_fits(int64_t M, int64_t N, int64_t K, const void* xq, const void* w);
// Launches it (the caller validated shapes, dtypes and fp8_gemv_fits).
void launch_fp8_gemv(CudaBackend& be, Tensor& out, const Fp8GemvArgs& args);

}  // namespace tandem
