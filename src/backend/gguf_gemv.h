// Which weight stream the CUDA backend runs for 1–8 row linears with k-quant weights (Q4_K,
// Q5_K, Q6_K; cuda_block_gemv_split.cu), a process-wide setting: TANDEM_GGUF_GEMV
// (cli/env_switches.h) sets it at start-up, the bench and the tests call the setter. Kept
// only until measured on a GPU (issue 42): the winner becomes the one path, the rest go.
//   0  today's stream (cuda_block_linear.cu): a warp streams two rows over all of K
//   1  split K: a CTA of 4 warps takes one row, its warps share K; octet reads as 0's
//   2  split K, one row a CTA, each lane reading its bytes once in 16-byte loads (Q6_K:
//      its ql and qh bytes once, in 2-byte halves: its blocks are 2-byte aligned)
//   3  as 2 with two rows a CTA (twice the loads in flight per warp, half the CTAs)
//   4  as 2 with four rows a CTA
// Every variant quantizes x as 0 does (int8 per 32 values) and sums the same products.
// Beside it, for steps of 9-256 rows: gguf_tiles() (TANDEM_GGUF_TILES) picks the
// tensor-core GEMM that decodes weight tiles in shared memory (cuda_block_tiles.h) over the
// decoded bf16 copy + cuBLASLt; off until measured on a GPU.
#pragma once

namespace tandem {

inline constexpr int kGgufGemvVariants = 5;  // values 0 .. 4

// The variant in force (0 unless set).
int gguf_gemv_variant();
// Sets it; a value outside [0, kGgufGemvVariants) throws tandem::Error naming it.
void set_gguf_gemv_variant(int variant);

// Whether many-row block-type linears run the shared-memory tiles (false unless set).
bool gguf_tiles();
void set_gguf_tiles(bool on);

}  // namespace tandem
