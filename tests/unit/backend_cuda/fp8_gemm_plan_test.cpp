// The FP8 wgmma GEMM's plan, work split, fit and Auto rules (cuda_gemm_fp8.h,
// cuda_gemm_fp8_plan.cpp): host code only, so these run on every machine, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>
#include <utility>

#include "backend/cuda/cuda_gemm_fp8.h"

namespace tandem {
namespace fp8_gemm_plan_test {

constexpr int kSms = 132;                       // an H200
constexpr int kSmemOptin = 232448;              // its opt-in shared memory per block (227 KB)
constexpr int kStaticSmem = 1024;               // the kernel's barriers (aligned)
constexpr int kStagingBytes = 2 * 32 * 68 * 4;  // the two warpgroups' epilogue rows

struct Shape {
  int64_t N, K;
};
// Llama-3.1-8B's linears, and edges: N and K off every tile, K below one 128-column block.
constexpr Shape kShapes[] = {{6144, 4096},  {4096, 4096},   {28672, 4096},
                             {4096, 14336}, {128256, 4096}, {200, 4160},
                             {130, 416},    {96, 208},      {64, 16}};
constexpr Shape kLlama[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};

TEST(Fp8WgmmaPlan, CoversEveryTokenAndFitsTheSharedMemory) {
  for (const Shape& s : kShapes)
    for (int64_t T = 1; T <= kFp8WgmmaMaxRows; T += 7) {
      SCOPED_TRACE(testing::Message() << "N " << s.N << " K " << s.K << " T " << T);
      const Fp8WgmmaPlan p = plan_fp8_wgmma(T, s.N, s.K, kSms, kSmemOptin);
      const int64_t k_blocks = (s.K + kFp8WgmmaBlockK - 1) / kFp8WgmmaBlockK;
      ASSERT_GT(p.token_tile, 0);
      ASSERT_EQ(p.token_tile % 16, 0) << "wgmma N and 1024-byte stage alignment";
      ASSERT_NE(
          std::find(std::begin(kFp8WgmmaTokenTiles), std::end(kFp8WgmmaTokenTiles), p.token_tile),
          std::end(kFp8WgmmaTokenTiles))
          << "a token tile without a kernel";
      ASSERT_GE(int64_t(p.token_tile) * p.token_tiles, T);
      ASSERT_LT(int64_t(p.token_tile) * (p.token_tiles - 1), T) << "an empty token tile";
      ASSERT_EQ(p.channel_tiles, (s.N + 127) / 128);
      ASSERT_EQ(p.k_blocks, k_blocks);
      ASSERT_EQ(p.tiles(), int64_t(p.channel_tiles) * p.token_tiles);
      ASSERT_GE(p.splits, 1);
      ASSERT_LE(p.splits, std::min<int64_t>(kFp8WgmmaMaxSplits, k_blocks)) << "a split without K";
      ASSERT_EQ(p.ctas, p.tiles() * p.splits);
      ASSERT_LE(p.ctas, kFp8WgmmaMaxCtas);
      const Fp8WgmmaWork w = p.work();
      ASSERT_LE(w.ctas, w.units) << "a run without work";
      for (int c = 0; c < w.ctas; c++)  // CTA c: slice c mod splits of tile c / splits
        ASSERT_EQ(w.begin(c) / p.k_blocks, (w.begin(c + 1) - 1) / p.k_blocks)
            << "CTA " << c << "'s run crosses a tile";
      ASSERT_EQ(w.cuts_tiles(), p.splits > 1);
      if (w.cuts_tiles()) {
        ASSERT_LE(p.ctas, kFp8WgmmaMaxCutCtas) << "arrival counters";
      }
      ASSERT_GE(p.stages, 2);
      ASSERT_LE(p.stages, kFp8WgmmaMaxStages);
      const int stage = (128 + p.token_tile) * kFp8WgmmaBlockK;
      ASSERT_GE(p.smem_bytes, p.stages * stage + kStagingBytes + 1024)
          << "the ring, its alignment and the staging";
      ASSERT_LE(p.smem_bytes + kStaticSmem, kSmemOptin);
      ASSERT_GT(p.estimate_us, 0.0);
    }
}

// Every unit in exactly one run; a cut tile's parts found alike from each of its CTAs;
// where the parts leave their sums never collides; one arrival counter per cut tile.
TEST(Fp8WgmmaPlan, WorkRunsCoverEveryUnitOnceAndCutTilesDoNotCollide) {
  const std::pair<int64_t, int> cases[] = {{32 * 32, 132},  {48 * 32, 132}, {224 * 32, 132},
                                           {32 * 112, 132}, {5 * 33, 41},   {2, 2},
                                           {7, 3},          {96 * 32, 96},  {10, 10}};
  for (const auto& [units, ctas] : cases)
    for (int k_blocks : {1, 2, 32, 33, 112}) {
      if (units % k_blocks != 0) continue;
      SCOPED_TRACE(testing::Message()
                   << "units " << units << " ctas " << ctas << " k_blocks " << k_blocks);
      const Fp8WgmmaWork w = Fp8WgmmaWork::make(units, ctas, k_blocks);
      ASSERT_EQ(w.begin(0), 0);
      ASSERT_EQ(w.begin(ctas), units);
      bool cut = false;
      std::set<int> slots, counters;
      for (int c = 0; c < ctas; c++) {
        ASSERT_LT(w.begin(c), w.begin(c + 1)) << "CTA " << c << " has no work";
        ASSERT_EQ(w.begin(c), int64_t(c) * units / ctas);
        for (int u = w.begin(c); u < w.begin(c + 1);) {  // the run's segments
          const int tile = u / k_blocks, end = std::min(w.begin(c + 1), (tile + 1) * k_blocks);
          const bool whole = u == tile * k_blocks && end == (tile + 1) * k_blocks;
          const int first = w.first_cta(tile, c), last = w.last_cta(tile, c);
          ASSERT_LE(first, c);
          ASSERT_GE(last, c);
          ASSERT_LE(w.begin(first), tile * k_blocks);
          ASSERT_GT(w.begin(first + 1), tile * k_blocks);
          ASSERT_LT(w.begin(last), (tile + 1) * k_blocks);
          ASSERT_GE(w.begin(last + 1), (tile + 1) * k_blocks);
          ASSERT_EQ(whole, first == last);
          if (!whole) {
            cut = true;
            ASSERT_TRUE(slots.insert(w.slot(c, tile)).second)
                << "slot of CTA " << c << " tile " << tile;
            ASSERT_LT(w.slot(c, tile), 2 * ctas);
            if (c == first) {
              ASSERT_TRUE(counters.insert(first).second) << "counter " << first;
            }
          }
          u = end;
        }
      }
      ASSERT_EQ(cut, w.cuts_tiles());
    }
}

TEST(Fp8WgmmaPlan, SplitsOnlyWhereTheTilesLeaveSmsIdle) {
  // 64 rows: o and down have 32 output tiles for 132 SMs, so K is split; gate_up's 224
  // tiles fill the GPU unsplit.
  EXPECT_GT(plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin).ctas, 64);
  EXPECT_GT(plan_fp8_wgmma(64, 4096, 14336, kSms, kSmemOptin).splits, 1);
  EXPECT_EQ(plan_fp8_wgmma(64, 28672, 4096, kSms, kSmemOptin).splits, 1);
  // A plan never runs more than one wave short of the GPU when it could fill it.
  for (int64_t T : {16, 64, 128, 256, 512}) {
    const Fp8WgmmaPlan p = plan_fp8_wgmma(T, 4096, 4096, kSms, kSmemOptin);
    EXPECT_LE(p.ctas, 2 * kSms) << T;
  }
  // Fewer SMs, fewer splits.
  EXPECT_LE(plan_fp8_wgmma(64, 4096, 4096, 16, kSmemOptin).ctas,
            plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin).ctas);
}

TEST(Fp8WgmmaPlan, ForcedSplitsAreHonouredUpToKsBlocks) {
  EXPECT_EQ(plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin, 1).splits, 1);
  EXPECT_EQ(plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin, 3).splits, 3);
  EXPECT_EQ(plan_fp8_wgmma(64, 96, 208, kSms, kSmemOptin, 5).splits, 2);  // 2 blocks of K
  EXPECT_EQ(plan_fp8_wgmma(64, 96, 16, kSms, kSmemOptin, 4).splits, 1);
}

TEST(Fp8WgmmaPlan, TheSplitOverrideIsSetAndReset) {
  const int saved = fp8_wgmma_splits();
  set_fp8_wgmma_splits(3);
  EXPECT_EQ(fp8_wgmma_splits(), 3);
  set_fp8_wgmma_splits(-2);
  EXPECT_EQ(fp8_wgmma_splits(), 0) << "negative: the rule";
  set_fp8_wgmma_splits(saved);
}

// Auto's rule as measured (cuda_gemm_fp8_plan.cpp): down (K >= 2N) to 128 rows, the other
// Llama shapes to 64; rows between two limits take the smaller.
TEST(Fp8WgmmaPlan, AutoPrefersTheKernelWhereItKeptUpWithCublasLt) {
  for (const Shape& s : kLlama) {
    SCOPED_TRACE(testing::Message() << "N " << s.N << " K " << s.K);
    const bool wide_k = s.K >= 2 * s.N;
    EXPECT_TRUE(fp8_wgmma_preferred(9, s.N, s.K));
    EXPECT_TRUE(fp8_wgmma_preferred(16, s.N, s.K));
    EXPECT_TRUE(fp8_wgmma_preferred(64, s.N, s.K));
    EXPECT_EQ(fp8_wgmma_preferred(65, s.N, s.K), wide_k);
    EXPECT_EQ(fp8_wgmma_preferred(128, s.N, s.K), wide_k);
    EXPECT_FALSE(fp8_wgmma_preferred(129, s.N, s.K));
    EXPECT_FALSE(fp8_wgmma_preferred(256, s.N, s.K));
    EXPECT_FALSE(fp8_wgmma_preferred(512, s.N, s.K));
  }
}

TEST(Fp8WgmmaPlan, FitsOnlySm90AlignedWholeRowShapes) {
  cudaDeviceProp props{};
  props.major = 9;
  props.minor = 0;
  props.sharedMemPerBlockOptin = kSmemOptin;
  alignas(16) static uint8_t buf[64];
  const void* a = buf;
  EXPECT_TRUE(fp8_wgmma_fits(props, 64, 4096, 4096, a, a));
  EXPECT_TRUE(fp8_wgmma_fits(props, 1, 4096, 16, a, a));
  EXPECT_TRUE(fp8_wgmma_fits(props, 512, 4096, 4096, a, a));
  EXPECT_FALSE(fp8_wgmma_fits(props, 513, 4096, 4096, a, a));
  EXPECT_FALSE(fp8_wgmma_fits(props, 64, 4096, 4104, a, a)) << "K % 16 != 0";
  EXPECT_FALSE(fp8_wgmma_fits(props, 64, 4096, 4096, buf + 8, a)) << "misaligned w";
  EXPECT_FALSE(fp8_wgmma_fits(props, 64, 4096, 4096, a, buf + 4)) << "misaligned xq";
  props.minor = 9;
  EXPECT_FALSE(fp8_wgmma_fits(props, 64, 4096, 4096, a, a)) << "sm_90a code on another GPU";
  props.major = 10;
  props.minor = 0;
  EXPECT_FALSE(fp8_wgmma_fits(props, 64, 4096, 4096, a, a));
  props.major = 9;
  props.sharedMemPerBlockOptin = 96 * 1024;
  EXPECT_FALSE(fp8_wgmma_fits(props, 64, 4096, 4096, a, a)) << "two stages of 256 tokens";
}

}  // namespace fp8_gemm_plan_test
}  // namespace tandem
