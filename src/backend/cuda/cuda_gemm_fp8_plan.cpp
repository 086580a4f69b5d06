// The FP8 wgmma GEMM's plan (cuda_gemm_fp8.h): how many tokens a CTA tile takes, how many
// token tiles, how many K slices per output tile, and the ring's depth. Host code only,
// so the rule is tested without a GPU (tests/unit/backend_cuda/fp8_gemm_plan_test.cpp).
//
// The rule: try every token tiling (1 to 4 tiles, each the narrowest supported width that
// covers ⌈T / tiles⌉ tokens) and every split count (1 to 16, at most K's 128-column
// blocks), and keep the one with the least estimated time, preferring fewer tiles and
// fewer splits unless the gain is over kMinGain. The estimate, per CTA, is a roofline of
// one ring step (128 channels x token_tile tokens x 128 columns):
//   - weight bytes from HBM: 16 KB per step, shared by the CTAs of the token tiles of one
//     channel tile (adjacent in the grid, so the later ones read it from L2), at the
//     CTA's share of HBM bandwidth (capped at what one SM can pull);
//   - bytes into the SM from L2: the weight tile and the token tile (16 KB + 128·tile);
//   - tensor-core time of the step's 2·128·tile·128 flops;
// times the steps of its K slice, plus a fixed cost (ring fill, epilogue) and, when split,
// its f32 partial tile; CTAs run in waves of num_sms (one CTA per SM: the ring takes most
// of the shared memory), and a split adds the reduce kernel (reads S partials, writes out).
// The constants are rough H200 figures, to be tuned against cuda_fp8_bench.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemm_fp8.h"

namespace tandem {

namespace {

constexpr double kHbmBytesPerNs = 4300;       // the H200's measured 4.3 TB/s
constexpr double kSmHbmBytesPerNs = 100;      // what one SM's ring pulls at most
constexpr double kL2BytesPerNsPerSm = 80;     // L2 -> SM, per SM (~10.6 TB/s on 132 SMs)
constexpr double kMmaFlopsPerNsPerSm = 11e3;  // e4m3 dense: ~75% of 1979 TFLOP/s / 132
constexpr double kCtaFixedNs = 1000;          // first stage's latency, epilogue
constexpr double kReduceFixedNs = 1500;       // the reduce kernel's launch and tail
constexpr double kMinGain = 0.03;             // a costlier plan must win by this much

// A warpgroup's staged f32 output: token_tile rows of 64 channels + 4 floats of padding.
constexpr int kStagePitchFloats = 64 + 4;
constexpr int kStaticSmemReserve = 1024 + 1024;  // barriers; aligning the ring to 1024 B

std::atomic<int> g_splits{0};

int64_t ceil_div64(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The narrowest supported tile width >= tokens, or 0 when none is.
int tile_for(int64_t tokens) {
  for (int w : kFp8WgmmaTokenTiles)
    if (w >= tokens) return w;
  return 0;
}

double estimate_ns(int64_t T, int64_t N, int64_t K, int tile, int token_tiles, int splits,
                   int num_sms) {
  const int64_t channel_tiles = ceil_div64(N, kFp8WgmmaChannelTile);
  const int64_t k_blocks = ceil_div64(K, kFp8WgmmaBlockK);
  const int64_t ctas = channel_tiles * token_tiles * splits;
  const int64_t waves = ceil_div64(ctas, num_sms);
  const int64_t concurrent = std::min<int64_t>(ctas, num_sms);
  const double hbm_per_cta = std::min(kHbmBytesPerNs / double(concurrent), kSmHbmBytesPerNs);
  const double a_bytes = double(kFp8WgmmaChannelTile) * kFp8WgmmaBlockK;
  const double step =
      std::max({a_bytes / token_tiles / hbm_per_cta,
                (a_bytes + double(tile) * kFp8WgmmaBlockK) / kL2BytesPerNsPerSm,
                2.0 * kFp8WgmmaChannelTile * tile * kFp8WgmmaBlockK / kMmaFlopsPerNsPerSm});
  const double partial_tile =
      splits > 1 ? 4.0 * kFp8WgmmaChannelTile * tile / kL2BytesPerNsPerSm : 0.0;
  const double cta = double(ceil_div64(k_blocks, splits)) * step + kCtaFixedNs + partial_tile;
  double ns = double(waves) * cta;
  if (splits > 1)
    ns += kReduceFixedNs +
          (4.0 * splits + 2.0) * double(T) * double(N) / (kL2BytesPerNsPerSm * num_sms);
  return ns;
}

// Ring depth and shared memory for a tile width; stages == 0 when two do not fit.
void size_ring(Fp8WgmmaPlan& plan, int smem_per_block) {
  const int stage = kFp8WgmmaChannelTile * kFp8WgmmaBlockK + plan.token_tile * kFp8WgmmaBlockK;
  const int staging = 2 * plan.token_tile * kStagePitchFloats * 4;  // reuses the ring
  const int avail = smem_per_block - kStaticSmemReserve;
  plan.stages = std::clamp(avail / stage, 0, kFp8WgmmaMaxStages);
  if (plan.stages < 2 || staging > avail) {
    plan.stages = 0;
    return;
  }
  plan.smem_bytes = std::max(plan.stages * stage, staging) + 1024;
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
  const int64_t k_blocks = std::max<int64_t>(1, ceil_div64(K, kFp8WgmmaBlockK));
  const int max_splits = int(std::min<int64_t>(kFp8WgmmaMaxSplits, k_blocks));
  const int lo = forced_splits > 0 ? std::min(forced_splits, max_splits) : 1;
  const int hi = forced_splits > 0 ? lo : max_splits;
  Fp8WgmmaPlan best;
  double best_ns = 0;
  int last_tile = 0;
  for (int tiles = 1; tiles <= 4; tiles++) {
    const int tile = tile_for(ceil_div64(std::max<int64_t>(T, 1), tiles));
    if (tile == 0 || tile == last_tile) continue;  // too wide, or no narrower than before
    last_tile = tile;
    const int token_tiles = int(ceil_div64(std::max<int64_t>(T, 1), tile));
    for (int splits = lo; splits <= hi; splits++) {
      const double ns = estimate_ns(T, N, K, tile, token_tiles, splits, num_sms);
      if (best.token_tile != 0 && ns >= best_ns * (1.0 - kMinGain)) continue;
      best.token_tile = tile;
      best.token_tiles = token_tiles;
      best.splits = splits;
      best_ns = ns;
    }
  }
  best.channel_tiles = int(ceil_div64(N, kFp8WgmmaChannelTile));
  best.estimate_us = best_ns * 1e-3;
  size_ring(best, smem_per_block);
  return best;
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

}  // namespace tandem
