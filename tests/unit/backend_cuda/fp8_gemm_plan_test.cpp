// The FP8 wgmma GEMM's plan and fit rules (cuda_gemm_fp8.h, cuda_gemm_fp8_plan.cpp): host
// code only, so these run on every machine, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "backend/cuda/cuda_gemm_fp8.h"

namespace tandem {
namespace {

constexpr int kSms = 132;           // an H200
constexpr int kSmemOptin = 232448;  // its opt-in shared memory per block (227 KB)
constexpr int kStaticSmem = 1024;   // the kernel's barriers (aligned)

struct Shape {
  int64_t N, K;
};
// Llama-3.1-8B's linears, and edges: N and K off every tile, K below one 128-column block.
constexpr Shape kShapes[] = {{6144, 4096},  {4096, 4096},   {28672, 4096},
                             {4096, 14336}, {128256, 4096}, {200, 4160},
                             {130, 416},    {96, 208},      {64, 16}};

TEST(Fp8WgmmaPlan, CoversEveryTokenAndFitsTheSharedMemory) {
  for (const Shape& s : kShapes)
    for (int64_t T = 1; T <= kFp8WgmmaMaxRows; T += 7) {
      SCOPED_TRACE(testing::Message() << "N " << s.N << " K " << s.K << " T " << T);
      const Fp8WgmmaPlan p = plan_fp8_wgmma(T, s.N, s.K, kSms, kSmemOptin);
      const int64_t k_blocks = (s.K + kFp8WgmmaBlockK - 1) / kFp8WgmmaBlockK;
      ASSERT_GT(p.token_tile, 0);
      ASSERT_LE(p.token_tile, 256);
      ASSERT_EQ(p.token_tile % 16, 0) << "wgmma N and 1024-byte stage alignment";
      ASSERT_NE(
          std::find(std::begin(kFp8WgmmaTokenTiles), std::end(kFp8WgmmaTokenTiles), p.token_tile),
          std::end(kFp8WgmmaTokenTiles))
          << "a token tile without a kernel";
      ASSERT_GE(int64_t(p.token_tile) * p.token_tiles, T);
      ASSERT_LT(int64_t(p.token_tile) * (p.token_tiles - 1), T) << "an empty token tile";
      ASSERT_EQ(p.channel_tiles, (s.N + 127) / 128);
      ASSERT_GE(p.splits, 1);
      ASSERT_LE(p.splits, std::min<int64_t>(kFp8WgmmaMaxSplits, k_blocks)) << "a split without K";
      ASSERT_GE(p.stages, 2);
      ASSERT_LE(p.stages, kFp8WgmmaMaxStages);
      const int stage = (128 + p.token_tile) * kFp8WgmmaBlockK;
      ASSERT_GE(p.smem_bytes, p.stages * stage + 1024) << "the ring and its alignment";
      ASSERT_GE(p.smem_bytes, 2 * p.token_tile * 68 * 4 + 1024) << "the epilogue's staging";
      ASSERT_LE(p.smem_bytes + kStaticSmem, kSmemOptin);
    }
}

TEST(Fp8WgmmaPlan, SplitsOnlyWhereTheTilesLeaveSmsIdle) {
  // 64 rows: o and down have 32 output tiles for 132 SMs, so K is split; gate_up's 224
  // tiles fill the GPU unsplit.
  EXPECT_GT(plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin).ctas(), 64);
  EXPECT_GT(plan_fp8_wgmma(64, 4096, 14336, kSms, kSmemOptin).splits, 1);
  EXPECT_EQ(plan_fp8_wgmma(64, 28672, 4096, kSms, kSmemOptin).splits, 1);
  // A plan never runs more than one wave short of the GPU when it could fill it.
  for (int64_t T : {16, 64, 128, 256, 512}) {
    const Fp8WgmmaPlan p = plan_fp8_wgmma(T, 4096, 4096, kSms, kSmemOptin);
    EXPECT_LE(p.ctas(), 2 * kSms) << T;
  }
  // Fewer SMs, fewer splits.
  EXPECT_LE(plan_fp8_wgmma(64, 4096, 4096, 16, kSmemOptin).ctas(),
            plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin).ctas());
}

TEST(Fp8WgmmaPlan, ForcedSplitsAreHonouredUpToKsBlocks) {
  EXPECT_EQ(plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin, 1).splits, 1);
  EXPECT_EQ(plan_fp8_wgmma(64, 4096, 4096, kSms, kSmemOptin, 3).splits, 3);
  EXPECT_EQ(plan_fp8_wgmma(64, 96, 208, kSms, kSmemOptin, 5).splits, 2);  // 2 blocks of K
  EXPECT_EQ(plan_fp8_wgmma(64, 96, 16, kSms, kSmemOptin, 4).splits, 1);
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

}  // namespace
}  // namespace tandem
