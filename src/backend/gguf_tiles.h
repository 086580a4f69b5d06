// Whether the CUDA backend runs block-type (GGUF) linears of 9–64 rows on the tensor-core
// tiles that decode the weight in shared memory (cuda_block_tiles.h) instead of the decoded
// bf16 copy + cuBLASLt: a process-wide setting, on unless TANDEM_GGUF_TILES=0
// (cli/env_switches.h; the copy is the fallback). The bench and the tests call the setter.
// Measured on an H100 (bench/RESULTS.md, 2026-12-06 fifth session): the tiles take an 8B
// layer at 16 / 64 rows in 303 / 336 µs (Q4_K) where the copy takes 402 / 404, and lose
// from 128 rows on.
#pragma once

namespace tandem {

// Whether many-row block-type linears run the shared-memory tiles (false unless set).
bool gguf_tiles();
void set_gguf_tiles(bool on);

// Whether the grouped GEMMs of block-type MoE experts run the same tiles
// (cuda_moe_block_tiles.cu) instead of the wmma kernels (cuda_moe_gemm.cu): off unless
// TANDEM_GGUF_MOE_TILES is set to something other than 0, until measured on a GPU. Read by
// every moe_experts call (a CUDA graph keeps the choice it was recorded with): set it at
// start-up, or around a test.
bool gguf_moe_tiles();
void set_gguf_moe_tiles(bool on);

}  // namespace tandem
