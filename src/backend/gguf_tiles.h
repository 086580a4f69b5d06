// Whether the CUDA backend runs block-type (GGUF) linears of 9–64 rows on the tensor-core
// tiles that decode the weight in shared memory (cuda_block_tiles.h) instead of the decoded
// bf16 copy + cuBLASLt: a process-wide setting, on unless TANDEM_GGUF_TILES=0
// (cli/env_switches.h; the copy is the fallback). The bench and the tests call the setter.
// Measured on an H100 (bench/RESULTS.md, 2026-12-06 fifth session): the tiles take an 8B
// layer at 16 / 64 rows in 303 / 336 µs (Q4_K) where the copy takes 402 / 404, and lose
// from 128 rows on.
#pragma once

namespace tandem {

// Whether many-row block-type linears run the shared-memory tiles (true unless set off).
bool gguf_tiles();
void set_gguf_tiles(bool on);

// Whether the grouped GEMMs of block-type MoE experts run the same tiles
// (cuda_moe_block_tiles.cu) instead of the wmma kernels (cuda_moe_gemm.cu): on unless
// TANDEM_GGUF_MOE_TILES=0. The wmma kernels stay as the fallback where the tiles cannot run
// (cuda_moe.cu says when). Measured on an H100 (issue 42), µs a Qwen3-30B-A3B layer's experts,
// wmma -> tiles at 1 / 8 / 64 / 256 tokens: Q4_K 199.1 -> 75.8, 498 -> 371.5, 992 -> 852,
// 1009 -> 874; Q6_K 197 -> 71.8, 536 -> 344, 1113 -> 798, 1124 -> 803.5; Q8_0 251 -> 68.8,
// 578 -> 381, 979 -> 746, 1004 -> 763. Read by every moe_experts call (a CUDA graph keeps the
// choice it was recorded with): set it at start-up, or around a test.
bool gguf_moe_tiles();
void set_gguf_moe_tiles(bool on);

}  // namespace tandem
