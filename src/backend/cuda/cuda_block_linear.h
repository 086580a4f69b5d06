// Linears and embeddings with ggml block-type weights on CUDA (cuda_block_linear.cu). Host
// header, safe for nvcc and g++.
#pragma once

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// Rows up to which a block-type linear streams its weights (the GEMV with 8-bit activations);
// beyond, the weight is decoded to bf16 copies for cuBLASLt's GEMM.
inline constexpr int kBlockGemvMaxRows = 8;
// The most bytes a many-row linear's decoded bf16 copy takes at once (a vocabulary of 128k
// at 4096 columns is 1 GB decoded: it goes in chunks of rows).
inline constexpr int64_t kDecodedChunkBytes = int64_t(256) << 20;

// out [T, N] = x [T, K] · W'ᵀ (+ bias [N]), W' the values of l.weight [N, K] in a ggml block
// type (K whole blocks); x bf16, out bf16 (or f32 without a bias). Validates and launches.
// `chunk_bytes`: the decoded copy's bound (tests pass a small one to cover the chunking).
void block_linear(CudaBackend& be, Tensor& out, const Tensor& x, const Linear& l,
                  int64_t chunk_bytes = kDecodedChunkBytes);

// out [T, D] bf16 = table [V, D][ids [T]] · scale, the table in a ggml block type. An id
// outside [0, V) gives a zero row (the CPU twin refuses it; a kernel cannot).
void block_embedding(CudaBackend& be, Tensor& out, const Tensor& table, const Tensor& ids,
                     float scale);

}  // namespace tandem
