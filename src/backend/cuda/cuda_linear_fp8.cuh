// Pieces the FP8 linear kernels share (cuda_linear_fp8.cu, the wgmma GEMM in
// cuda_gemm_fp8_sm90.cu, the weight stream in cuda_gemv_fp8.cu, the FP8 expert GEMMs in
// cuda_moe_gemm.cu): how a weight's scales cover it (cuda_weight_scales.h), and the launcher
// of the input quantization.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_weight_scales.h"

namespace tandem::cuda {

// The FP8 linears' input quantization (quantize_rows_kernel, cuda_linear_fp8.cu; the CPU
// twin's arithmetic): xq [T, K] = e4m3(x / s) and scales [T, ⌈K / group⌉] = s, per token
// and group of `group` columns, s = max(|x|, 1e-12) / 448 — or *static_scale for every
// group when it is set. x [T, K] bf16. Launched with PDL (cuda_pdl.cuh); T == 0 launches
// nothing.
void launch_quantize_rows(cudaStream_t stream, uint8_t* xq, float* scales, const __nv_bfloat16* x,
                          int64_t T, int64_t K, int64_t group, const float* static_scale);

}  // namespace tandem::cuda
