// The FP8 (e4m3) linears on CUDA: cuda_linear_fp8.cu. Host header, safe for nvcc and g++.
//
// Which path takes a call (Auto; in code: takes_weight_stream, then choose_fp8_path):
//   - 1–8 rows, per-tensor, per-channel or 128-column block weights, x small enough to
//     stage in a CTA: the FP8 weight stream (cuda_gemv_fp8.cu: cuda_gemv.cu's bulk-copy
//     ring at half the bytes per weight, mma.sync e4m3), which quantizes x itself.
// Otherwise x is first quantized (one small kernel: per token, or per token and block_k
// columns, s_x = amax / 448, or the static input scale) to e4m3 plus its f32 scales; then
//   - per-tensor or per-channel weights, K % 16 == 0, an sm_90 GPU, and up to the rows
//     where it was measured at least as fast as cuBLASLt (fp8_wgmma_preferred: 64 rows,
//     128 where K >= 2N): tandem's own GEMM on wgmma + TMA (cuda_gemm_fp8.h: split-K
//     over the tiles' k-blocks, cut tiles summed deterministically), scales and bias in
//     its epilogue;
//   - otherwise per-channel weights: cuBLASLt's e4m3 GEMM with OUTER_VEC_32F scales
//     (s_w per output channel on A, s_x per token on B), bf16 or f32 out, no epilogue;
//   - if cuBLASLt refuses that, or per-tensor weights: its unscaled e4m3 GEMM to f32 and
//     a scale kernel (one extra f32 write and read of the output: T·N·8 bytes);
//   - what none of those takes (block weights past 8 rows; odd shapes): the plain stream,
//     a warp per output row reading 16 weight bytes per lane per load, the scales applied
//     per 16-column chunk (correct for every layout; for many rows it rereads the weights
//     per 2 rows).
#pragma once

#include <cstdint>

namespace tandem {

// CudaBackend::set_fp8_gemm_path: one path forced, for tests and benches that compare them.
enum class Fp8GemmPath : uint8_t {
  Auto,      // as above
  Stream,    // the plain stream for every shape (the simplest kernel, for comparisons)
  Epilogue,  // cuBLASLt unscaled + the scale kernel where cuBLASLt takes the shape
  Lt,        // Auto as it was before the wgmma GEMM: the weight stream, then cuBLASLt
  Wgmma,     // the wgmma GEMM for 1–512 rows where it fits, else as Lt
};

// How the many-row tensor-core GEMMs (cuBLASLt's e4m3 GEMM and the wgmma GEMM) sum over K
// (CudaOptions::fp8_fast_accum). Fast, the default: all of K chained in the tensor cores'
// own accumulator (cuBLASLt's FAST_ACCUM; CUTLASS's FP8FastAccum kernels, which vLLM and
// TensorRT-LLM serve with): 4–5% more throughput. Promoted (off): each 128 columns' partial
// sum added into an f32 total on the CUDA cores, kept as the fallback for accuracy: against
// f32 sums at K = 14,336 the f32 outputs' relative error is 1.1e-4 against fast's 2.6e-3
// (cuBLASLt) / 4.3e-4 (wgmma) (bench/RESULTS.md, 2026-12-02, third session). The weight
// stream (1–8 rows) always sums in f32.

}  // namespace tandem
