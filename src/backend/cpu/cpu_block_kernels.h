// The contract between cpu_block_gemm.cpp and its per-ISA kernel files (cpu_block_avx2.cpp,
// cpu_block_avx512.cpp, cpu_block_avx512vnni.cpp). Plain data only, as cpu_gemm_kernels.h:
// the wider files are compiled with their own target flags and nothing inline they include
// may be shared with the baseline code.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// ggml's block types (core/ggml_blocks.h), in DType's order.
enum class BlockKind : uint8_t {
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_NL,
  IQ4_XS
};

// The exact product: out[m, n] = Σ_k x[m, k] · w'[n, k] in f32, w' = dequantize_row's values
// (decoded in registers, each value fl(fl(s·q) + b) as ggml rounds it), summed in exactly the
// order of the f32 GEMM tile (cpu_gemm_tile.h: one accumulator per output, chunks of 2 · lanes
// k in order, then V::reduce), so every output has the bits gemm_xwt gives over w' in f32.
struct BlockExactOperands {
  const float* x = nullptr;    // [M, K]
  const uint8_t* w = nullptr;  // [N, K / block_elems] blocks
  float* out = nullptr;        // [M, ldo]: columns [n0, n1) are written
  int64_t M = 0, K = 0, ldo = 0;
  int64_t block_rows = 64;  // weight rows per block: every group of x rows passes over a block
                            // while it is in L2
  BlockKind kind = BlockKind::Q4_0;
};

void block_exact_rows_avx2(const BlockExactOperands& g, int64_t n0, int64_t n1);
void block_exact_rows_avx512(const BlockExactOperands& g, int64_t n0, int64_t n1);

// dst [n1 − n0, K] = w' of weight rows [n0, n1) in f32 (the values dequantize_row gives).
void block_decode_rows_avx2(BlockKind kind, const uint8_t* w, int64_t K, int64_t n0, int64_t n1,
                            float* dst);
void block_decode_rows_avx512(BlockKind kind, const uint8_t* w, int64_t K, int64_t n0, int64_t n1,
                              float* dst);

// Activations quantized per block for the integer kernels: q = round(x / d) in [−127, 127],
// d = max|x| / 127 per act_block values (32 for the 32-value block types, as ggml's Q8_0;
// 256 for the k-quants and IQ4_XS, as ggml's Q8_K), and xs = d · Σ q over each run of 16
// (what a weight block's offset and min multiply).
struct BlockActs {
  const int8_t* q = nullptr;  // [M, K]
  const float* d = nullptr;   // [M, K / act_block]
  const float* xs = nullptr;  // [M, K / 16]
  int64_t act_block = 32;
};

// The integer product: out[m, n] = Σ_blocks d_w · d_x · Σ_16 sc · Σ (u − o) · q
// + Σ_16 (dm · mn) · xs — the weights' own decomposition (scale d, integer sub-scales sc and
// mins mn, levels u around an offset o) against the quantized activations, the integer dot
// products exact (vpdpbusd / vpmaddubsw) and the rest in f32 in a fixed order.
struct BlockInt8Operands {
  BlockActs acts;
  const uint8_t* w = nullptr;  // [N, K / block_elems] blocks
  float* out = nullptr;        // [M, ldo]
  int64_t M = 0, K = 0, ldo = 0;
  BlockKind kind = BlockKind::Q4_0;
};

void block_int8_rows_avx2(const BlockInt8Operands& g, int64_t n0, int64_t n1);
void block_int8_rows_avx512vnni(const BlockInt8Operands& g, int64_t n0, int64_t n1);

}  // namespace tandem::cpu
