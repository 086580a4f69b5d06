// Whether the CUDA backend runs block-type (GGUF) linears of 9–256 rows on the tensor-core
// tiles that decode the weight in shared memory (cuda_block_tiles.h) instead of the decoded
// bf16 copy + cuBLASLt: a process-wide setting. TANDEM_GGUF_TILES (cli/env_switches.h) sets
// it at start-up, the bench and the tests call the setter. Off until measured on a GPU
// (issue 42): then the winner becomes the one path and the switch goes.
#pragma once

namespace tandem {

// Whether many-row block-type linears run the shared-memory tiles (false unless set).
bool gguf_tiles();
void set_gguf_tiles(bool on);

}  // namespace tandem
