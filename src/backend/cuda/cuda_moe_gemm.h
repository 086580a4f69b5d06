// The expert GEMMs of moe_experts: a grouped GEMM over rows already sorted by expert
// (cuda_moe.cu sorts them). Expert e owns the row "slots" [offsets[e], offsets[e+1]); its
// rows are cut into tiles of kMoeTileRows, and tile_offsets[e] numbers its first tile, so
// one launch covers every expert whatever the counts — the counts stay on the device and
// the launch is graph-capturable. The grid is sized by a host upper bound on the tiles;
// blocks past the real count exit at once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_linear_fp8.cuh"

namespace tandem::cuda {

constexpr int kMoeTileRows = 64;
constexpr int kMoeTileK = 32;  // the K step of the expert GEMMs

// Where each expert's rows lie (device arrays filled by the routing kernel).
struct ExpertRows {
  const int32_t* offsets;       // [E + 1]: slots of expert e are [offsets[e], offsets[e+1])
  const int32_t* tile_offsets;  // [E + 1]: row tiles of expert e start at tile_offsets[e]
  int num_experts;
  int64_t max_row_tiles;  // host bound >= tile_offsets[E]
};

// a[s, f] = act(x[token[s]] · gate_e[f]) * (x[token[s]] · up_e[f]), e the expert of slot s.
//   a [slots, F], x [T, D], token [slots], gate_up [E, 2F, D] (gate rows, then up rows)
void launch_moe_gate_up(cudaStream_t stream, __nv_bfloat16* a, const __nv_bfloat16* x,
                        const int32_t* token, const __nv_bfloat16* gate_up, const ExpertRows& rows,
                        int64_t D, int64_t F, Activation act);

// y[s, d] = a[s] · down_e[d], e the expert of slot s.
//   y [slots, D], a [slots, F], down [E, D, F]
void launch_moe_down(cudaStream_t stream, __nv_bfloat16* y, const __nv_bfloat16* a,
                     const __nv_bfloat16* down, const ExpertRows& rows, int64_t D, int64_t F);

// ---------------------------------------------------------------- ggml block-type experts
// The same grouped GEMMs on experts in one of ggml's block types (core/ggml_blocks.h): each
// weight tile decoded to bf16 in shared memory (cuda_block_decode.cuh), then the bf16 MMAs
// (wmma). The fallback of the shared-memory tiles below, where those cannot run.

// A stacked block-type projection: expert e's rows start at row e · rows_per_expert.
struct BlockExperts {
  const uint8_t* w = nullptr;  // [E, Nw, K] in blocks, K a whole number of them
  DType dtype = DType::Q4_K;
};

// launch_moe_gate_up / launch_moe_down on block-type experts (D and F whole blocks).
void launch_moe_gate_up_block(cudaStream_t stream, __nv_bfloat16* a, const __nv_bfloat16* x,
                              const int32_t* token, const BlockExperts& gate_up,
                              const ExpertRows& rows, int64_t D, int64_t F, Activation act);
void launch_moe_down_block(cudaStream_t stream, __nv_bfloat16* y, const __nv_bfloat16* a,
                           const BlockExperts& down, const ExpertRows& rows, int64_t D, int64_t F);

// The same two GEMMs on the tensor-core tiles of the dense block linears (cuda_block_tiles.cuh,
// cuda_moe_block_tiles.cu): a CTA takes one expert row tile and 128 weight rows (gate_up: 64
// gate rows and the same 64 up rows), K in steps of 256 values decoded in shared memory, the
// slots' rows gathered by cp.async, mma.sync m16n8k16. The same arithmetic as the kernels
// above (weights rounded to bf16, f32 sums), summed in another order. Chosen by
// gguf_moe_tiles() (backend/gguf_tiles.h: on unless TANDEM_GGUF_MOE_TILES=0) for each
// projection the tiles fit; the kernels above are the fallback (cuda_moe.cu).
// Whether the tiles take experts of `dtype` stored at w (16-byte aligned) on a device with
// smem_optin bytes of shared memory a block (sharedMemPerBlockOptin; every type fits sm_90's).
bool moe_block_tiles_fit(DType dtype, const void* w, size_t smem_optin);
// x and a 16-byte aligned (besides launch_moe_gate_up_block's and launch_moe_down_block's terms).
void launch_moe_gate_up_block_tiles(cudaStream_t stream, __nv_bfloat16* a, const __nv_bfloat16* x,
                                    const int32_t* token, const BlockExperts& gate_up,
                                    const ExpertRows& rows, int64_t D, int64_t F, Activation act);
void launch_moe_down_block_tiles(cudaStream_t stream, __nv_bfloat16* y, const __nv_bfloat16* a,
                                 const BlockExperts& down, const ExpertRows& rows, int64_t D,
                                 int64_t F);

// ---------------------------------------------------------------- FP8 (e4m3) experts
// The same grouped GEMMs on e4m3 experts in the W8A8 arithmetic of the FP8 linears (and of
// the CPU twin, cpu_moe.cpp): the input rows quantized to e4m3 (per row, and per block_k
// columns for block weights; or by the expert's static input scale), the e4m3 products
// summed in f32, and each column group's sum scaled by s_x · s_w.

// A stacked e4m3 expert projection (linear.h): every tensor with a leading E. Expert e's
// scales are `scales` (laid out as one dense FP8 linear's, cuda_linear_fp8.cuh) moved by
// e · scales_per_expert.
struct Fp8ExpertWeights {
  const uint8_t* w = nullptr;  // [E, Nw, K] e4m3
  WeightScales scales;         // expert 0's: [1], [Nw] or [⌈Nw / block_n⌉, ⌈K / block_k⌉]
  int64_t scales_per_expert = 1;
  int64_t block_k = 0;  // block weights only; a multiple of kMoeTileK (the caller checks)
};

// The input of an FP8 expert GEMM, one of:
//   dynamic: q [rows, K] e4m3 and scales [rows, groups] f32, quantized beforehand by
//     launch_quantize_rows (cuda_linear_fp8.cuh) with group = block_k (block weights; groups
//     = ⌈K / block_k⌉) or K (groups = 1);
//   static: x [rows, K] bf16, quantized by the GEMM as it loads it with the tile's expert's
//     input_scale [E] (one token meets a different scale in each of its experts, so there is
//     no single e4m3 copy of it to make beforehand).
struct Fp8ExpertInput {
  const uint8_t* q = nullptr;
  const float* scales = nullptr;
  const __nv_bfloat16* x = nullptr;
  const float* input_scale = nullptr;
  bool is_static() const { return x != nullptr; }
};

// launch_moe_gate_up on e4m3 experts.   a [slots, F], x: [T, D] rows (see Fp8ExpertInput),
// token [slots], gate_up [E, 2F, D]
void launch_moe_gate_up_fp8(cudaStream_t stream, __nv_bfloat16* a, const Fp8ExpertInput& x,
                            const int32_t* token, const Fp8ExpertWeights& gate_up,
                            const ExpertRows& rows, int64_t D, int64_t F, Activation act);

// launch_moe_down on e4m3 experts.   y [slots, D], a: [slots, F] rows, down [E, D, F]
void launch_moe_down_fp8(cudaStream_t stream, __nv_bfloat16* y, const Fp8ExpertInput& a,
                         const Fp8ExpertWeights& down, const ExpertRows& rows, int64_t D,
                         int64_t F);

// The same two GEMMs on the FP8 tensor cores (cuda_moe_gemm_fp8_mma.cu: mma.sync e4m3,
// sm_89+), the operands read as e4m3 bytes: the same arithmetic (exact e4m3 products summed
// in f32, each column group's sum scaled by s_x · s_w), summed in another order. Chosen by
// CudaOptions::fp8_moe_tc (TANDEM_FP8_MOE_TC, on unless 0). On an H200 (bench/RESULTS.md,
// 2026-12-06 fifth session) 2.2–2.5× the reference kernel end to end on Mixtral- and
// Qwen3-MoE-shaped models, at decode-b1 and at 64 rows.
void launch_moe_gate_up_fp8_tc(cudaStream_t stream, __nv_bfloat16* a, const Fp8ExpertInput& x,
                               const int32_t* token, const Fp8ExpertWeights& gate_up,
                               const ExpertRows& rows, int64_t D, int64_t F, Activation act);
void launch_moe_down_fp8_tc(cudaStream_t stream, __nv_bfloat16* y, const Fp8ExpertInput& a,
                            const Fp8ExpertWeights& down, const ExpertRows& rows, int64_t D,
                            int64_t F);

}  // namespace tandem::cuda
