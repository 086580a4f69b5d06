// The FP8 (e4m3) GEMM on Hopper's wgmma and TMA for linears of 9 to 512 rows
// (cuda_gemm_fp8_sm90.cu; the plan rule and Auto's choice in cuda_gemm_fp8_plan.cpp). Host
// header, safe for nvcc and g++.
//
// It computes out[t, n] = s_x[t] · s_w(n) · Σ_k xq[t, k] · wq[n, k] (+ bias[n]) for an
// already quantized x (xq [T, K] e4m3, one scale per token) and a weight [N, K] e4m3 with
// one scale per tensor or per output channel; bf16 or f32 out. The output is cut into tiles
// of 128 channels x `token_tile` tokens (the wgmma's M and N sides) and K into 128-column
// k-blocks; each tile's k-blocks are cut into `splits` equal slices (to a block), one CTA
// each (split-K: at small row counts the tiles alone would leave most SMs idle). A tile cut over
// several CTAs is finished by one of them, which adds the others' f32 partial sums in CTA
// order (deterministic: the same bits whatever the timing).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// Rows the kernel takes at most; which calls Auto gives it is fp8_wgmma_preferred.
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
// CTAs of a launch whose tiles are cut over several CTAs: two arrival counters each (one
// per consumer warpgroup) in the backend's zeroed buffer (CudaBackend::fp8_gemm_counters).
inline constexpr int kFp8WgmmaMaxCutCtas = 4096;

// One launch's work: units are (output tile, k-block) pairs, tile-major (a tile's k-blocks
// consecutive; tile = channel_tile · token_tiles + token_tile, so the token tiles sharing a
// weight tile are neighbours), and CTA c takes the run [begin(c), begin(c + 1)) with
// begin(c) = ⌊c · units / ctas⌋. With ctas = tiles · splits (the plan's), CTA c takes
// slice c mod splits of tile ⌊c / splits⌋; the formula and the kernel also take runs that
// cross tiles. A tile whose units span several CTAs has "parts", one per CTA in CTA order;
// part 0 is the end of the first CTA's run, the others the starts of the following runs.
// Integers only (32-bit on the device: units < 2^31, ctas <= kFp8WgmmaMaxCtas, so
// c · (units mod ctas) < 2^31).
inline constexpr int kFp8WgmmaMaxCtas = 32768;
struct Fp8WgmmaWork {
  int units = 0;         // tiles · k_blocks
  int ctas = 0;          // G, 1 ≤ G ≤ units
  int k_blocks = 0;      // ⌈K / 128⌉
  int per = 0, rem = 0;  // units = per · ctas + rem

  static Fp8WgmmaWork make(int64_t units, int ctas, int k_blocks) {
    Fp8WgmmaWork w;
    w.units = int(units);
    w.ctas = ctas;
    w.k_blocks = k_blocks;
    w.per = ctas > 0 ? int(units / ctas) : 0;
    w.rem = ctas > 0 ? int(units % ctas) : 0;
    return w;
  }
  __host__ __device__ int begin(int c) const { return c * per + c * rem / ctas; }
  // The first and the last CTA holding units of `tile`, found from any CTA that holds one.
  __host__ __device__ int first_cta(int tile, int from) const {
    while (from > 0 && begin(from) > tile * k_blocks) from--;
    return from;
  }
  __host__ __device__ int last_cta(int tile, int from) const {
    while (from + 1 < ctas && begin(from + 1) < (tile + 1) * k_blocks) from++;
    return from;
  }
  // Where CTA c leaves its f32 partial sums of a cut tile: a run has at most two cut tiles,
  // the one it starts in (slot 2c) and the one it ends in (2c + 1).
  __host__ __device__ int slot(int c, int tile) const {
    return 2 * c + (begin(c) / k_blocks == tile ? 0 : 1);
  }
  // Whether some tile spans several CTAs (host: the launcher sizes the workspace by it).
  bool cuts_tiles() const {
    for (int c = 1; c < ctas; c++)
      if (begin(c) % k_blocks != 0) return true;
    return false;
  }
};

// How one call is cut into CTAs (plan_fp8_wgmma).
struct Fp8WgmmaPlan {
  int token_tile = 0;      // tokens per tile: the wgmma's N (16, 32, 48, ..., 256)
  int token_tiles = 0;     // ⌈T / token_tile⌉
  int channel_tiles = 0;   // ⌈N / 128⌉
  int k_blocks = 0;        // ⌈K / 128⌉
  int splits = 0;          // CTAs per tile, each an equal slice of K's blocks
  int ctas = 0;            // CTAs launched: tiles · splits
  int stages = 0;          // ring stages of (128 + token_tile) x 128 bytes
  int smem_bytes = 0;      // dynamic shared memory per CTA
  double estimate_us = 0;  // the rule's estimate of the GEMM's time, without quantizing x
  int64_t tiles() const { return int64_t(channel_tiles) * token_tiles; }
  Fp8WgmmaWork work() const { return Fp8WgmmaWork::make(tiles() * k_blocks, ctas, k_blocks); }
};

// The plan for out [T, N] = xq [T, K] · wᵀ on a GPU of `num_sms` SMs with `smem_per_block`
// bytes of opt-in shared memory per block (the rule and its constants, fitted to the
// H200's measurements, are in cuda_gemm_fp8_plan.cpp). forced_splits > 0 fixes the split
// count (clamped to K's blocks); tests use it to cover both the cut and the uncut epilogue.
Fp8WgmmaPlan plan_fp8_wgmma(int64_t T, int64_t N, int64_t K, int num_sms, int smem_per_block,
                            int forced_splits = 0);

// Process-wide split override for tests and benchmarks: 0 = the rule.
void set_fp8_wgmma_splits(int splits);
int fp8_wgmma_splits();

// Whether the kernel takes the call: an sm_90 device (the kernel is built for sm_90a
// alone), 1 ≤ T ≤ kFp8WgmmaMaxRows, K % 16 == 0 (TMA's 16-byte row pitch), w and xq
// 16-byte aligned, and enough shared memory for two stages of the widest tile.
bool fp8_wgmma_fits(const cudaDeviceProp& props, int64_t T, int64_t N, int64_t K, const void* w,
                    const void* xq);

// Auto's choice between this kernel and cuBLASLt for a call the kernel fits: a row limit
// per shape class, from the measured table (cuda_gemm_fp8_plan.cpp says which).
bool fp8_wgmma_preferred(int64_t T, int64_t N, int64_t K);

struct Fp8WgmmaArgs {
  Tensor* out;             // [T, N] bf16 or f32
  const Tensor* xq;        // [T, K] e4m3
  const Tensor* x_scales;  // [T] f32: s_x per token (dynamic, or the static scale)
  const Tensor* w;         // [N, K] e4m3
  const float* w_scales;   // [N] (per_channel) or [1] f32, on the device
  bool per_channel;
  const Tensor* bias;  // [N] bf16, or undefined (always with an f32 out)
  bool fast_accum = false;  // all of K in wgmma's accumulator (CudaOptions::fp8_fast_accum)
};

// Launches the GEMM on the backend's stream with programmatic dependent launch. The
// caller validated the tensors and fp8_wgmma_fits. Cut tiles take their partial sums'
// workspace from the backend (capture-safe) and its arrival counters.
void launch_fp8_wgmma(CudaBackend& be, const Fp8WgmmaArgs& args);

}  // namespace tandem
