// Pieces the FP8 linear kernels share (cuda_linear_fp8.cu, the wgmma GEMM in
// cuda_gemm_fp8_sm90.cu, the weight stream in cuda_gemv_fp8.cu, the FP8 expert GEMMs in
// cuda_moe_gemm.cu): how a weight's scales cover it (cuda_weight_scales.h), the launcher of
// the input quantization, and the checked form of a call.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_linear_fp8.h"
#include "backend/cuda/cuda_weight_scales.h"

namespace tandem::cuda {

// The FP8 linears' input quantization (quantize_rows_kernel, cuda_linear_fp8.cu; the CPU
// twin's arithmetic): xq [T, K] = e4m3(x / s) and scales [T, ⌈K / group⌉] = s, per token
// and group of `group` columns, s = max(|x|, 1e-12) / 448 — or *static_scale for every
// group when it is set. x [T, K] bf16. Launched with PDL (cuda_pdl.cuh); T == 0 launches
// nothing.
void launch_quantize_rows(cudaStream_t stream, uint8_t* xq, float* scales, const __nv_bfloat16* x,
                          int64_t T, int64_t K, int64_t group, const float* static_scale);

// A checked FP8 linear call: what every path reads (cuda_linear_fp8.cu).
struct Fp8Call {
  Tensor* out;                // [T, N] bf16, or f32 (then no bias)
  const Tensor* x;            // [T, K] bf16
  const Tensor* w;            // [N, K] e4m3
  WeightScales ws;            // w's scales
  const Tensor* bias;         // [N] bf16 or undefined
  const float* static_scale;  // [1] (static input scale) or null: x quantized per token
  int64_t T, N, K;
  int64_t group;  // columns per x scale: block_k for Block weights, else K
  bool out_f32;
  const __nv_bfloat16* bias_ptr() const {
    return bias->defined() ? bias->ptr<__nv_bfloat16>() : nullptr;
  }
};

// Every check of an FP8 linear out = x · lᵀ (dtypes, shapes, the scales' layout: linear.h);
// throws naming what is wrong.
Fp8Call check_fp8_call(Tensor& out, const Tensor& x, const Linear& l);

// Whether the FP8 weight stream (1–8 rows) takes the call: under `forced` Auto or Lt, with
// the weight streams on (CudaOptions::gemv), where fp8_gemv_fits.
bool takes_weight_stream(const Fp8Call& c, Fp8GemmPath forced, bool stream_on);

}  // namespace tandem::cuda
