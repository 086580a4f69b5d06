// The tensor-core GEMM for linears with ggml block-type weights at more than
// kBlockGemvMaxRows rows (cuda_block_tiles.cu): each weight block is read from HBM once per
// tile of 64 x rows and decoded to bf16 in shared memory, never into an HBM copy. Chosen
// over the decoded copy (cuda_block_linear.cu) while gguf_tiles() is on (TANDEM_GGUF_TILES,
// backend/gguf_tiles.h) until measured on a GPU. Host header, safe for nvcc and g++.
#pragma once

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// The most rows the tiles take: one x tile. Each further 64 rows decode the weight once
// more, while the copy's cost is paid once for all rows and cuBLASLt's GEMM outruns the
// mma.sync tiles: on an H100 the copy wins from 128 rows on (Q4_K 414 µs a layer against
// 655; bench/RESULTS.md, 2026-12-06 fifth session), so larger steps stay on the copy.
inline constexpr int kBlockTilesMaxRows = 64;

// Whether the tiles take this linear: at most kBlockTilesMaxRows rows, x and w 16-byte aligned
// (their copies into shared memory go 16 bytes at a time) and the device's shared memory holds a
// CTA's (up to 204 KiB: sm_90). Every block type the dense path accepts is taken.
bool block_tiles_fit(const CudaBackend& be, const Tensor& x, const Tensor& w);

// out [T, N] = x [T, K] · W'ᵀ (+ bias [N]): the arguments block_linear validated (W' the
// values of w [N, K] in a ggml block type, x bf16, out bf16 or f32 without a bias), with
// block_tiles_fit(x, w). Launches through launch_pdl with backend allocations only, so it
// records into a CUDA graph.
void block_tiles_linear(CudaBackend& be, Tensor& out, const Tensor& x, const Tensor& w,
                        const Tensor& bias);

}  // namespace tandem
