// The FP8 wgmma GEMM's plan (cuda_gemm_fp8.h): the token tile, the CTAs and the ring's
// depth for a call in a variant; Auto's choice between the kernel and cuBLASLt; the
// process's variant. Host code only, so the rules are tested without a GPU
// (tests/unit/backend_cuda/fp8_gemm_plan_test.cpp).
//
// Token tile: the fewest tiles of at most the variant's widest (256, or 128), each the
// narrowest built width that covers its share of the rows. CTAs: Stream variants take one
// per SM (clusters of 2: one pair per two SMs; fewer when the work has under
// kMinStreamUnits k-blocks per run); the Split variant tries 1 to 4 token tiles and 1 to
// 16 splits per tile and keeps the least estimated time, preferring fewer tiles and
// splits unless the gain is over kMinGain.
//
// The estimate, per CTA and k-block, is the longer of
//   - its consumers' step: kStepNs + ns_per_token · token_tile,
//   - its memory: the 16 KB weight tile at the CTA's share of HBM (at most what one SM
//     pulls) for a channel tile's first token tile and from L2 for the others, plus the
//     token tile from L2 (half of it with multicast),
// times the k-blocks of its run, plus a fixed cost per CTA and, where tiles are cut over
// CTAs, the partial sums' fix-up; Split CTAs run in waves of num_sms (one CTA per SM).
// The constants are a least-squares fit (log time, grid search) to the first H200 run's
// table (run1: the Split variant with the Serial consumer and a separate reduce kernel;
// 20 points of 16-512 rows on the four Llama-3.1-8B shapes, 7% rms error, quantizing x
// and launching taken as a constant 3 µs). The overlapping consumers' rate is a guess
// until they are measured.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemm_fp8.h"

namespace tandem {

namespace {

constexpr double kHbmBytesPerNs = 4300;     // the H200's measured 4.3 TB/s
constexpr double kSmBytesPerNs = 55;        // what one SM's ring pulls, from HBM or L2 (fit)
constexpr double kStepNs = 160;             // a consumer step's fixed part (fit)
constexpr double kSerialNsPerToken = 3.8;   // Serial, per token of the tile (fit: 58% of the
                                            // tensor cores' rate at 256 tokens)
constexpr double kOverlapNsPerToken = 2.6;  // PingPong, Dual: a guess (~85% of it)
constexpr double kCtaFixedNs = 1000;        // ring fill, epilogue (fit)
constexpr double kFixupNs = 500;    // a cut tile's in-kernel fix-up (run1's reduce kernel: ~4 µs)
constexpr double kMinGain = 0.03;   // a costlier Split plan must win by this much
constexpr int kMinStreamUnits = 4;  // Stream: k-blocks per CTA at least

// A warpgroup's epilogue staging: 32 token rows of 64 channels + 4 floats of padding, two
// warpgroups (cuda_gemm_fp8_sm90.cu); the ring aligned to 1024 B; the barriers.
constexpr int kStagingBytes = 2 * 32 * (64 + 4) * 4;
constexpr int kStaticSmemReserve = 1024 + 1024;

std::atomic<int> g_splits{0};
std::atomic<int> g_variant{-1};  // -1: TANDEM_FP8_WGMMA_VARIANT

int64_t ceil_div64(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int env_variant() {
  static const int v = [] {
    const char* s = std::getenv("TANDEM_FP8_WGMMA_VARIANT");
    const int parsed = s && *s ? std::atoi(s) : 0;
    return parsed >= 0 && parsed < kFp8WgmmaNumVariants ? parsed : 0;
  }();
  return v;
}

// The narrowest built tile width >= tokens that the variant takes, or 0 when none is.
int tile_for(int64_t tokens, const Fp8WgmmaVariant& v) {
  for (int w : kFp8WgmmaTokenTiles) {
    if (w > v.max_token_tile) break;
    if (w >= tokens) return w;
  }
  return 0;
}

double estimate_ns(int64_t N, int64_t K, int tile, int token_tiles, int64_t ctas, int num_sms,
                   Fp8WgmmaConsumer consumer, int cluster, bool cut) {
  const int64_t k_blocks = ceil_div64(K, kFp8WgmmaBlockK);
  const int64_t units =
      ceil_div64(ceil_div64(N, kFp8WgmmaChannelTile), cluster) * token_tiles * k_blocks;
  const int64_t runs = ctas / cluster;  // a cluster's CTAs share their run
  const int64_t per_run = ceil_div64(units, runs);
  const bool overlaps = consumer == Fp8WgmmaConsumer::PingPong ||
                        (consumer == Fp8WgmmaConsumer::Dual && tile <= 128);  // else Serial's loop
  const double per_token = overlaps ? kOverlapNsPerToken : kSerialNsPerToken;
  const double step = kStepNs + per_token * tile;
  const double w_bytes = double(kFp8WgmmaChannelTile) * kFp8WgmmaBlockK;
  const double x_bytes = double(tile) * kFp8WgmmaBlockK / cluster;  // multicast: half each
  const int64_t slots = std::max(1, num_sms / cluster);
  double ns = 0;
  for (int64_t done = 0; done < runs; done += slots) {  // waves
    const int64_t active = cluster * std::min<int64_t>(slots, runs - done);
    const double hbm = std::min(kSmBytesPerNs, kHbmBytesPerNs / double(active));
    const double mem = w_bytes / token_tiles / hbm +
                       (w_bytes * (1.0 - 1.0 / token_tiles) + x_bytes) / kSmBytesPerNs;
    ns += double(per_run) * std::max(step, mem) + kCtaFixedNs;
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

void plan_stream(Fp8WgmmaPlan& p, int64_t T, int num_sms, const Fp8WgmmaVariant& v) {
  const int64_t rows = std::max<int64_t>(T, 1);
  p.token_tiles = int(ceil_div64(rows, v.max_token_tile));
  p.token_tile = tile_for(ceil_div64(rows, p.token_tiles), v);
  const int64_t units = p.tiles() * p.k_blocks;
  const int runs = std::max(1, num_sms / p.cluster);
  p.ctas = p.cluster * int(std::clamp<int64_t>(units / kMinStreamUnits, 1, runs));
  p.splits = 0;
}

void plan_split(Fp8WgmmaPlan& p, int64_t T, int64_t N, int64_t K, int num_sms,
                const Fp8WgmmaVariant& v, int forced_splits) {
  const int max_splits = int(std::min<int64_t>(kFp8WgmmaMaxSplits, p.k_blocks));
  const int lo = forced_splits > 0 ? std::min(forced_splits, max_splits) : 1;
  const int hi = forced_splits > 0 ? lo : max_splits;
  const int64_t rows = std::max<int64_t>(T, 1);
  double best_ns = 0;
  int last_tile = 0;
  for (int tiles = 1; tiles <= 4; tiles++) {
    const int tile = tile_for(ceil_div64(rows, tiles), v);
    if (tile == 0 || tile == last_tile) continue;  // too wide, or no narrower than before
    last_tile = tile;
    const int token_tiles = int(ceil_div64(rows, tile));
    const int64_t all_tiles = int64_t(p.channel_tiles) * token_tiles;
    for (int splits = lo; splits <= hi; splits++) {
      if (splits > lo && all_tiles * splits > kFp8WgmmaMaxCutCtas) break;
      const double ns = estimate_ns(N, K, tile, token_tiles, all_tiles * splits, num_sms,
                                    v.consumer, 1, splits > 1);
      if (p.token_tile != 0 && ns >= best_ns * (1.0 - kMinGain)) continue;
      p.token_tile = tile;
      p.token_tiles = token_tiles;
      p.splits = splits;
      best_ns = ns;
    }
  }
  p.ctas = int(p.tiles() * p.splits);
}

}  // namespace

int fp8_wgmma_variant() {
  const int v = g_variant.load();
  return v >= 0 ? v : env_variant();
}
void set_fp8_wgmma_variant(int variant) {
  g_variant.store(variant < kFp8WgmmaNumVariants ? variant : -1);
}

void set_fp8_wgmma_splits(int splits) {
  g_splits.store(std::max(0, splits));
}
int fp8_wgmma_splits() {
  return g_splits.load();
}

Fp8WgmmaPlan plan_fp8_wgmma(int64_t T, int64_t N, int64_t K, int num_sms, int smem_per_block,
                            int variant, int forced_splits) {
  num_sms = std::max(1, num_sms);
  Fp8WgmmaPlan p;
  p.variant = std::clamp(variant, 0, kFp8WgmmaNumVariants - 1);
  const Fp8WgmmaVariant& v = kFp8WgmmaVariants[p.variant];
  p.cluster = v.schedule == Fp8WgmmaSchedule::Stream ? v.cluster : 1;
  p.channel_tiles = int(ceil_div64(std::max<int64_t>(N, 1), kFp8WgmmaChannelTile));
  p.k_blocks = int(std::max<int64_t>(1, ceil_div64(K, kFp8WgmmaBlockK)));
  if (v.schedule == Fp8WgmmaSchedule::Stream)
    plan_stream(p, T, num_sms, v);
  else
    plan_split(p, T, N, K, num_sms, v, forced_splits);
  if (p.token_tile == 0) return p;
  p.estimate_us = 1e-3 * estimate_ns(N, K, p.token_tile, p.token_tiles, p.ctas, num_sms, v.consumer,
                                     p.cluster, p.work().cuts_tiles());
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
// run1 (H200; the Split variant with the Serial consumer, before the in-kernel fix-up;
// bench/cuda_fp8_bench.cpp's many-row table):
//   K >= 2N (down, 4096 x 14336): faster to 256 rows (43.6 vs 46.3 µs), slower at 512
//     (71.1 vs 51.1);
//   other shapes (qkv, o, gate_up): faster at 16 and 64 rows (at 64: 15.1, 15.3, 40.7 vs
//     17.3, 17.7, 47.8 µs), slower from 128 (18.0, 17.7, 50.6 vs 16.9, 17.3, 40.2).
// Rows between two measured counts take the smaller limit. The bench prints, per variant
// and shape, the rows up to which the kernel keeps up with cuBLASLt: the figures to put
// here once a variant is the default.
constexpr int64_t kWideKMaxRows = 256, kOtherMaxRows = 64;

bool fp8_wgmma_preferred(int64_t T, int64_t N, int64_t K) {
  return T <= (K >= 2 * N ? kWideKMaxRows : kOtherMaxRows);
}

}  // namespace tandem
