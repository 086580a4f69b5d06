// The contract between cpu_gemm.cpp and its per-ISA kernel files. Plain data only: the
// AVX-512 file is compiled with wider target flags, and nothing inline that it includes
// may be shared with code that runs on an AVX2-only machine.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// E4M3: FP8 weights, widened to their exact values (the caller applies their scales).
// E4M3_BLOCKS: FP8 weights widened and multiplied in f32 by their [block_n, block_k]
// block's scale (GemmOperands::blocks), i.e. the f32 weights Wq · s_w.
enum class WeightType : uint8_t { BF16, F16, F32, E4M3, E4M3_BLOCKS };

constexpr int64_t weight_bytes(WeightType wt) {
  return wt == WeightType::F32 ? 4 : wt == WeightType::E4M3 || wt == WeightType::E4M3_BLOCKS ? 1 : 2;
}

// The block scales of E4M3_BLOCKS weights: s [⌈N / block_n⌉, ld]; block_k is a whole number
// of kernel chunks.
struct BlockScales {
  const float* s = nullptr;
  int64_t ld = 0, block_n = 0, block_k = 0;
};

// One product's operands, with x already padded with zeros to kp (a whole number of
// kernel chunks of 2 · lanes k values; pack_rows in cpu_gemm.cpp). Every weight dtype is
// widened in k order, so equal values give equal bits whatever their storage dtype.
struct GemmOperands {
  const float* xp = nullptr;  // [M, kp] zero-padded
  const void* w = nullptr;    // [N, K] of wt
  float* out = nullptr;       // [M, ldo]: columns [0, N) are written
  int64_t M = 0, K = 0, kp = 0, ldo = 0;
  int64_t block_rows = 64;  // weight rows per block: a block stays in L2 while every
                            // group of x rows passes over it
  WeightType wt = WeightType::BF16;
  BlockScales blocks;  // E4M3_BLOCKS only
};

// out[m, n] for every m < M and n in [n0, n1).
void gemm_rows_avx2(const GemmOperands& g, int64_t n0, int64_t n1);
void gemm_rows_avx512(const GemmOperands& g, int64_t n0, int64_t n1);
// dst[i] = the bf16 of e4m3 src[i] (exact: every e4m3 value is a bf16 one), i < n.
void widen_e4m3_to_bf16_avx2(const uint8_t* src, uint16_t* dst, int64_t n);
void widen_e4m3_to_bf16_avx512(const uint8_t* src, uint16_t* dst, int64_t n);

// k values per kernel step: 2 · the vector's f32 lanes.
constexpr int64_t kChunkAvx2 = 16;
constexpr int64_t kChunkAvx512 = 32;

}  // namespace tandem::cpu
