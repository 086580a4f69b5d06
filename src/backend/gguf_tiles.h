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

}  // namespace tandem
