// The FP8 wgmma GEMM's plan (cuda_gemm_fp8.h): the token tile, the splits of K and the
// ring's depth for a call; Auto's choice between the kernel and cuBLASLt. Host code only,
// so the rules are tested without a GPU (tests/unit/backend_cuda/fp8_gemm_plan_test.cpp).
//
// The plan tries 1 to 4 token tiles (each the narrowest built width that covers its share
// of the rows) and 1 to 16 splits per tile, and keeps the least estimated time, preferring
// fewer tiles and splits unless the gain is over kMinGain.
//
// The estimate, per CTA and k-block, is the longer of
//   - its consumers' step: kStepNs + kNsPerToken · token_tile,
//   - its memory: the 16 KB weight tile at the CTA's share of HBM (at most what one SM
//     pulls) for a channel tile's first token tile and from L2 for the others, plus the
//     token tile from L2,
// times the k-blocks of its slice, plus a fixed cost per CTA and, where tiles are cut over
// CTAs, the partial sums' fix-up; CTAs run in waves of num_sms (one CTA per SM). The
// constants are a least-squares fit (log time, grid search) to the first H200 run's table
// (run1: this schedule with a separate reduce kernel for the cut tiles; 20 points of 16-512
// rows on the four Llama-3.1-8B shapes, 7% rms error, quantizing x and launching taken as
// a constant 3 µs). kFixupNs, the in-kernel fix-up that replaced the reduce kernel, is a
// guess. Against run2 (this kernel; its plans are this rule's on 132 SMs) the estimate +
// 3 µs holds for plans that split nothing (gate_up to 256 rows: within 5%) but every split
// plan ran 1.3-1.85x longer (o and down at 16-256 rows, 4 splits on 128 CTAs; at 16 rows
// 1.7 and 2.2 TB/s of weights where the model has HBM's 4.3). The constants stand:
// refitting them would change the plans Auto's row limits were measured with.
#include <algorithm>
#include <atomic>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemm_fp8.h"

namespace tandem {

namespace {

constexpr double kHbmBytesPerNs = 4300;  // the H200's measured 4.3 TB/s
constexpr double kSmBytesPerNs = 55;     // what one SM's ring pulls, from HBM or L2 (fit)
constexpr double kStepNs = 160;          // a consumer step's fixed part (fit)
constexpr double kNsPerToken = 3.8;      // per token of the tile (fit: 58% of the tensor
                                         // cores' rate at 256 tokens)
constexpr double kCtaFixedNs = 1000;     // ring fill, epilogue (fit)
constexpr double kFixupNs = 500;   // a cut tile's in-kernel fix-up (run1's reduce kernel: ~4 µs)
constexpr double kMinGain = 0.03;  // a costlier plan must win by this much

// A warpgroup's epilogue staging: 32 token rows of 64 channels + 4 floats of padding, two
// warpgroups (cuda_gemm_fp8_epilogue.cuh); the ring aligned to 1024 B; the barriers.
constexpr int kStagingBytes = 2 * 32 * (64 + 4) * 4;
constexpr int kStaticSmemReserve = 1024 + 1024;

std::atomic<int> g_splits{0};

int64_t ceil_div64(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The narrowest built tile width >= tokens, or 0 when none is.
int tile_for(int64_t tokens) {
  for (int w : kFp8WgmmaTokenTiles)
    if (w >= tokens) return w;
  return 0;
}

double estimate_ns(int64_t N, int64_t K, int tile, int token_tiles, int64_t ctas, int num_sms,
                   bool cut) {
  const int64_t k_blocks = ceil_div64(K, kFp8WgmmaBlockK);
  const int64_t units = ceil_div64(N, kFp8WgmmaChannelTile) * token_tiles * k_blocks;
  const int64_t per_cta = ceil_div64(units, ctas);
  const double step = kStepNs + kNsPerToken * tile;
  const double w_bytes = double(kFp8WgmmaChannelTile) * kFp8WgmmaBlockK;
  const double x_bytes = double(tile) * kFp8WgmmaBlockK;
  double ns = 0;
  for (int64_t done = 0; done < ctas; done += num_sms) {  // waves
    const int64_t active = std::min<int64_t>(num_sms, ctas - done);
    const double hbm = std::min(kSmBytesPerNs, kHbmBytesPerNs / double(active));
    const double mem = w_bytes / token_tiles / hbm +
                       (w_bytes * (1.0 - 1.0 / token_tiles) + x_bytes) / kSmBytesPerNs;
    ns += double(per_cta) * std::max(step, mem) + kCtaFixedNs;
  }
  if (cut)  // one CTA's partial tile written, and read back by the one finishing it
    ns += kFixupNs + 2.0 * 4.0 * kFp8WgmmaChannelTile * tile / kSmBytesPerNs;
  return ns;
}

// Ring depth and shared memory for a tile width; stages == 0 when two do not fit.
void size_ring(Fp8WgmmaPlan& plan, int smem_per_block) {
  const int stage = kFp8WgmmaChannelTile * kFp8WgmmaBlockK + plan.token_tile * kFp8WgmmaBlockK;
  const int avail = smem_per_block - kStaticSmemReserve - kStagingBytes;
  plan.stages = std::clamp(avail / stage, 0, kFp8WgmmaMaxStages);
  if (plan.stages < 2) {
    plan.stages = 0;
    return;
  }
  plan.smem_bytes = plan.stages * stage + kStagingBytes + 1024;
}

}  // namespace

void set_fp8_wgmma_splits(int splits) {
  g_splits.store(std::max(0, splits));
}
int fp8_wgmma_splits() {
  return g_splits.load();
}

Fp8WgmmaPlan plan_fp8_wgmma(int64_t T, int64_t N, int64_t K, int num_sms, int smem_per_block,
                            int forced_splits) {
  num_sms = std::max(1, num_sms);
  Fp8WgmmaPlan p;
  p.channel_tiles = int(ceil_div64(std::max<int64_t>(N, 1), kFp8WgmmaChannelTile));
  p.k_blocks = int(std::max<int64_t>(1, ceil_div64(K, kFp8WgmmaBlockK)));
  const int max_splits = int(std::min<int64_t>(kFp8WgmmaMaxSplits, p.k_blocks));
  const int lo = forced_splits > 0 ? std::min(forced_splits, max_splits) : 1;
  const int hi = forced_splits > 0 ? lo : max_splits;
  const int64_t rows = std::max<int64_t>(T, 1);
  double best_ns = 0;
  int last_tile = 0;
  for (int tiles = 1; tiles <= 4; tiles++) {
    const int tile = tile_for(ceil_div64(rows, tiles));
    if (tile == 0 || tile == last_tile) continue;  // too wide, or no narrower than before
    last_tile = tile;
    const int token_tiles = int(ceil_div64(rows, tile));
    const int64_t all_tiles = int64_t(p.channel_tiles) * token_tiles;
    for (int splits = lo; splits <= hi; splits++) {
      if (splits > lo && all_tiles * splits > kFp8WgmmaMaxCutCtas) break;
      const double ns =
          estimate_ns(N, K, tile, token_tiles, all_tiles * splits, num_sms, splits > 1);
      if (p.token_tile != 0 && ns >= best_ns * (1.0 - kMinGain)) continue;
      p.token_tile = tile;
      p.token_tiles = token_tiles;
      p.splits = splits;
      best_ns = ns;
    }
  }
  if (p.token_tile == 0) return p;
  p.ctas = int(p.tiles() * p.splits);
  p.estimate_us = 1e-3 * best_ns;
  size_ring(p, smem_per_block);
  return p;
}

bool fp8_wgmma_fits(const cudaDeviceProp& props, int64_t T, int64_t N, int64_t K, const void* w,
                    const void* xq) {
  if (props.major != 9 || props.minor != 0) return false;  // sm_90a code only
  if (T < 1 || T > kFp8WgmmaMaxRows || N < 1 || K < 16 || K % 16 != 0) return false;
  if (N >= (int64_t(1) << 31) || K >= (int64_t(1) << 31)) return false;  // TMA's int coordinates
  if (!cuda::aligned16(w) || !cuda::aligned16(xq)) return false;
  Fp8WgmmaPlan widest;
  widest.token_tile = 256;
  size_ring(widest, int(props.sharedMemPerBlockOptin));
  return widest.stages >= 2;
}

// Auto's row limits: the kernel where the measured table has it at least as fast as
// cuBLASLt's e4m3 GEMM (each with the quantize kernel in front), cuBLASLt beyond. From
// run2 (H200, this kernel; bench/cuda_fp8_bench.cpp's many-row table, µs, kernel vs
// cuBLASLt; bench/RESULTS.md, 2026-12-02):
//   K >= 2N (down, 4096 x 14336): faster to 128 rows (64: 34.9 vs 45.1, 128: 40.9 vs
//     44.7), slower from 192 (47.3 vs 45.2);
//   other shapes: faster or even to 64 rows (64: gate_up 39.7 vs 47.2, o 16.8 vs 16.5,
//     qkv 15.1 vs 17.3 in run1, whose qkv rows run2 lost), slower from 96 (gate_up 44.8
//     vs 41.3, o 19.0 vs 16.7).
// Rows between two measured counts take the smaller limit.
constexpr int64_t kWideKMaxRows = 128, kOtherMaxRows = 64;

bool fp8_wgmma_preferred(int64_t T, int64_t N, int64_t K) {
  return T <= (K >= 2 * N ? kWideKMaxRows : kOtherMaxRows);
}

}  // namespace tandem
