// The FP8 (e4m3) GEMM on Hopper's wgmma and TMA for linears of 9 to 512 rows
// (cuda_gemm_fp8_sm90.cu; the plan rule in cuda_gemm_fp8_plan.cpp). Host header, safe for
// nvcc and g++.
//
// It computes out[t, n] = s_x[t] · s_w(n) · Σ_k xq[t, k] · wq[n, k] (+ bias[n]) for an
// already quantized x (xq [T, K] e4m3, one scale per token) and a weight [N, K] e4m3 with
// one scale per tensor or per output channel; bf16 or f32 out. A CTA owns a tile of 128
// output channels x `token_tile` tokens (the wgmma's M and N sides) and, when the tiles are
// too few to fill the GPU, one of `splits` slices of K: the slices' f32 partial sums go
// to a workspace and a small kernel adds them in slice order (deterministic: no float
// atomics, the same bits whatever the timing) before applying the scales.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// Rows the kernel takes. Auto hands it what the weight stream (cuda_gemv_fp8.cu) does not
// take: from 9 rows, and fewer where x is too wide for the stream's staging; more rows go
// to cuBLASLt.
inline constexpr int64_t kFp8WgmmaMaxRows = 512;
// Output channels per CTA tile (two consumer warpgroups of the wgmma's 64 rows), and the
// K columns (bytes) of one ring stage: one 128-byte swizzle row.
inline constexpr int kFp8WgmmaChannelTile = 128;
inline constexpr int kFp8WgmmaBlockK = 128;
inline constexpr int kFp8WgmmaMaxStages = 12;
inline constexpr int kFp8WgmmaMaxSplits = 16;
// Token-tile widths (wgmma N) the kernel is built for: every decode graph bucket above 8
// rows (12 → 16, 24 → 32, ...) lands on one with little padding.
inline constexpr int kFp8WgmmaTokenTiles[] = {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256};

// How one call is cut into CTAs (plan_fp8_wgmma).
struct Fp8WgmmaPlan {
  int token_tile = 0;      // tokens per CTA tile: the wgmma's N (16, 32, 48, ..., 256)
  int token_tiles = 0;     // ⌈T / token_tile⌉
  int channel_tiles = 0;   // ⌈N / 128⌉
  int splits = 0;          // CTAs per output tile, each a slice of K's 128-column blocks
  int stages = 0;          // ring stages of (128 + token_tile) x 128 bytes
  int smem_bytes = 0;      // dynamic shared memory per CTA
  double estimate_us = 0;  // the rule's estimate of the GEMM's time (for the bench)
  int64_t ctas() const { return int64_t(channel_tiles) * token_tiles * splits; }
};

// The plan for out [T, N] = xq [T, K] · wᵀ on a GPU of `num_sms` SMs with
// `smem_per_block` bytes of opt-in shared memory per block: the token tile, token tiles
// and splits with the least estimated time (a roofline per CTA step, waves of num_sms
// CTAs, the partial sums' traffic; the rule and its constants are in
// cuda_gemm_fp8_plan.cpp). forced_splits > 0 fixes the split count (clamped to K's
// blocks); tests use it to cover both the split and the unsplit epilogue.
Fp8WgmmaPlan plan_fp8_wgmma(int64_t T, int64_t N, int64_t K, int num_sms, int smem_per_block,
                            int forced_splits = 0);

// Process-wide split override for tests and benchmarks: 0 = the rule (default).
void set_fp8_wgmma_splits(int splits);
int fp8_wgmma_splits();

// Whether the kernel takes the call: an sm_90 device (the kernel is built for sm_90a
// alone), 1 ≤ T ≤ kFp8WgmmaMaxRows, K % 16 == 0 (TMA's 16-byte row pitch), w and xq
// 16-byte aligned, and enough shared memory for two stages of the widest tile.
bool fp8_wgmma_fits(const cudaDeviceProp& props, int64_t T, int64_t N, int64_t K, const void* w,
                    const void* xq);

struct Fp8WgmmaArgs {
  Tensor* out;             // [T, N] bf16 or f32
  const Tensor* xq;        // [T, K] e4m3
  const Tensor* x_scales;  // [T] f32: s_x per token (dynamic, or the static scale)
  const Tensor* w;         // [N, K] e4m3
  const float* w_scales;   // [N] (per_channel) or [1] f32, on the device
  bool per_channel;
  const Tensor* bias;  // [N] bf16, or undefined (always with an f32 out)
};

// Launches the GEMM (and the split reduction when the plan splits K) on the backend's
// stream with programmatic dependent launch. The caller validated the tensors and
// fp8_wgmma_fits. Allocates the partial sums from the backend (capture-safe).
void launch_fp8_wgmma(CudaBackend& be, const Fp8WgmmaArgs& args);

}  // namespace tandem
