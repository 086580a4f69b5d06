// Linears and embeddings with ggml block-type weights on CUDA (cuda_block_linear.cu). Host
// header, safe for nvcc and g++.
#pragma once

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// Rows up to which a block-type linear streams its weights (the GEMV with 8-bit activations);
// up to kBlockTileMaxRows it runs the tensor-core tiles that decode weights in shared memory;
// beyond, the weight is decoded to a bf16 copy once for cuBLASLt's GEMM.
inline constexpr int kBlockGemvMaxRows = 8;
inline constexpr int kBlockTileMaxRows = 128;

// out [T, N] = x [T, K] · W'ᵀ (+ bias [N]), W' the values of l.weight [N, K] in a ggml block
// type (K whole blocks); x bf16, out bf16 (or f32 without a bias). Validates and launches.
void block_linear(CudaBackend& be, Tensor& out, const Tensor& x, const Linear& l);

// out [T, D] bf16 = table [V, D][ids [T]] · scale, the table in a ggml block type. An id
// outside [0, V) gives a zero row (the CPU twin refuses it; a kernel cannot).
void block_embedding(CudaBackend& be, Tensor& out, const Tensor& table, const Tensor& ids,
                     float scale);

}  // namespace tandem
