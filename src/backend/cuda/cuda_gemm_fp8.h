// The FP8 (e4m3) GEMM on Hopper's wgmma and TMA for linears of 9 to 512 rows
// (cuda_gemm_fp8_sm90.cu; the plan rule and Auto's choice in cuda_gemm_fp8_plan.cpp). Host
// header, safe for nvcc and g++.
//
// It computes out[t, n] = s_x[t] · s_w(n) · Σ_k xq[t, k] · wq[n, k] (+ bias[n]) for an
// already quantized x (xq [T, K] e4m3, one scale per token) and a weight [N, K] e4m3 with
// one scale per tensor or per output channel; bf16 or f32 out. The output is cut into tiles
// of 128 channels x `token_tile` tokens (the wgmma's M and N sides) and K into 128-column
// k-blocks; a launch's CTAs share the (tile, k-block) units in equal runs (Fp8WgmmaWork).
// A tile whose k-blocks span several CTAs is finished by one of them, which adds the
// others' f32 partial sums in CTA order (deterministic: the same bits whatever the timing).
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
// CTAs of a launch whose tiles are cut over several runs: two arrival counters each (one
// per consumer warpgroup) in the backend's zeroed buffer (CudaBackend::fp8_gemm_counters).
inline constexpr int kFp8WgmmaMaxCutCtas = 4096;

// How a launch's CTAs share the units (Fp8WgmmaWork).
enum class Fp8WgmmaSchedule : uint8_t {
  Split,   // G = tiles · splits: each tile's K in `splits` equal slices (1: a CTA per tile)
  Stream,  // G = the SMs (fewer for small work): every CTA the same number of k-blocks
           // whatever the tile count ("stream-K"; at most one wave)
};

// How a consumer warpgroup overlaps its wgmmas with adding each k-block's fresh
// accumulator into its f32 total (the promotion every 128 columns of K).
enum class Fp8WgmmaConsumer : uint8_t {
  Serial,    // waits for a k-block's wgmmas, then adds: the two warpgroups overlap by chance
  PingPong,  // Serial, the two warpgroups issuing in turn (named barriers), so one's adds
             // run under the other's wgmmas by construction
  Dual,      // two fresh accumulators: the next k-block's wgmmas are issued before the
             // last one's are added (wgmma.wait_group 1); tiles up to 128 tokens (registers),
             // wider ones run as Serial
};

// The kernel variants built: one is the process's default (fp8_wgmma_variant), the tests
// run every one and the bench times every one.
struct Fp8WgmmaVariant {
  Fp8WgmmaSchedule schedule;
  Fp8WgmmaConsumer consumer;
  int max_token_tile;  // the widest token tile the plan takes (more rows: more token tiles)
  // CTAs per cluster (Stream only): 2 = pairs of CTAs on neighbouring channel tiles share
  // each token tile, each loading half of it by TMA multicast into both (half the token
  // bytes from L2 per CTA); a run then covers both tiles of a pair.
  int cluster;
  const char* name;
};
inline constexpr Fp8WgmmaVariant kFp8WgmmaVariants[] = {
    {Fp8WgmmaSchedule::Split, Fp8WgmmaConsumer::Serial, 256, 1, "split"},
    {Fp8WgmmaSchedule::Stream, Fp8WgmmaConsumer::Serial, 256, 1, "stream"},
    {Fp8WgmmaSchedule::Stream, Fp8WgmmaConsumer::PingPong, 256, 1, "stream+pingpong"},
    {Fp8WgmmaSchedule::Stream, Fp8WgmmaConsumer::Dual, 256, 1, "stream+dual"},
    {Fp8WgmmaSchedule::Stream, Fp8WgmmaConsumer::Dual, 128, 1, "stream+dual<=128"},
    {Fp8WgmmaSchedule::Stream, Fp8WgmmaConsumer::Serial, 256, 2, "stream+multicast"},
};
inline constexpr int kFp8WgmmaNumVariants =
    int(sizeof(kFp8WgmmaVariants) / sizeof(Fp8WgmmaVariant));

// The process's variant: TANDEM_FP8_WGMMA_VARIANT (0..kFp8WgmmaNumVariants-1) read at first
// use, default 0; set_fp8_wgmma_variant overrides it (tests, benchmarks), a negative value
// goes back to the environment's.
int fp8_wgmma_variant();
void set_fp8_wgmma_variant(int variant);

// One launch's work: units are (output tile, k-block) pairs, tile-major (a tile's k-blocks
// consecutive; tile = channel_tile · token_tiles + token_tile, so the token tiles sharing a
// weight tile are neighbours), and CTA c takes the run [begin(c), begin(c + 1)) with
// (clusters: a tile is a pair of channel tiles, and c a cluster, whose CTAs share the run)
// begin(c) = ⌊c · units / ctas⌋. A tile whose units span several CTAs has "parts", one
// per CTA in CTA order; part 0 is the end of the first CTA's run, the others the starts
// of the following runs. Integers only (32-bit on the device: units < 2^31, ctas <=
// kFp8WgmmaMaxCtas, so c · (units mod ctas) < 2^31).
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
  int variant = 0;         // the kFp8WgmmaVariants entry planned for
  int token_tile = 0;      // tokens per tile: the wgmma's N (16, 32, 48, ..., 256)
  int token_tiles = 0;     // ⌈T / token_tile⌉
  int channel_tiles = 0;   // ⌈N / 128⌉
  int k_blocks = 0;        // ⌈K / 128⌉
  int splits = 0;          // Split: CTAs per tile; Stream: 0
  int cluster = 1;         // CTAs per cluster (the variant's)
  int ctas = 0;            // CTAs launched (a multiple of cluster)
  int stages = 0;          // ring stages of (128 + token_tile) x 128 bytes
  int smem_bytes = 0;      // dynamic shared memory per CTA
  double estimate_us = 0;  // the rule's estimate of the GEMM's time, without quantizing x
  // The work's tiles: output tiles, or pairs of them (a cluster's) when cluster = 2.
  int64_t tiles() const { return int64_t((channel_tiles + cluster - 1) / cluster) * token_tiles; }
  Fp8WgmmaWork work() const {
    return Fp8WgmmaWork::make(tiles() * k_blocks, ctas / cluster, k_blocks);
  }
};

// The plan for out [T, N] = xq [T, K] · wᵀ in `variant` on a GPU of `num_sms` SMs with
// `smem_per_block` bytes of opt-in shared memory per block (the rule and its constants,
// fitted to the H200's measurements, are in cuda_gemm_fp8_plan.cpp). forced_splits > 0
// fixes a Split variant's split count (clamped to K's blocks); tests use it to cover both
// the cut and the uncut epilogue. Stream variants ignore it.
Fp8WgmmaPlan plan_fp8_wgmma(int64_t T, int64_t N, int64_t K, int num_sms, int smem_per_block,
                            int variant, int forced_splits = 0);

// Process-wide split override for tests and benchmarks (Split variants): 0 = the rule.
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
};

// Launches the GEMM in the process's variant on the backend's stream with programmatic
// dependent launch. The caller validated the tensors and fp8_wgmma_fits. Cut tiles take
// their partial sums' workspace from the backend (capture-safe) and its arrival counters.
void launch_fp8_wgmma(CudaBackend& be, const Fp8WgmmaArgs& args);

}  // namespace tandem
