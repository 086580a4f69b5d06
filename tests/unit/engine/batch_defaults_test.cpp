// What `--batch auto` and `--max-batched-tokens auto` resolve to (engine/batch_defaults.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "engine/batch_defaults.h"

namespace tandem {
namespace batch_defaults_test {

// Llama-3.1-8B's KV in bf16: 32 layers × 8 KV heads × 128 × (K, V) × 2 bytes.
constexpr int64_t kLlama8bTokenBytes = 32 * 8 * 128 * 2 * 2;

BatchFacts gpu(int64_t available, int max_model_len = 131072) {
  return {.gpu = true, .kv_bytes_available = available,
          .kv_bytes_per_token = kLlama8bTokenBytes, .max_model_len = max_model_len};
}

TEST(BatchDefaults, AnH200RunsWhatItsCacheHoldsUpToTheCap) {
  // ~110 GB left after the weights: 409 rows of 2,048 tokens fit (bf16 KV).
  BatchChoice c = choose_batch({}, gpu(int64_t(110e9)));
  EXPECT_EQ(c.rows, 409);
  EXPECT_EQ(c.tokens, 8192);
  EXPECT_EQ(c.reason.find("capped"), std::string::npos) << c.reason;
  // Twice the room (an fp8 cache is half the bytes a token) and more: the cap.
  BatchChoice capped = choose_batch({}, gpu(int64_t(600e9)));
  EXPECT_EQ(capped.rows, kMaxAutoRows);
  EXPECT_EQ(capped.tokens, std::max(kCudaAutoTokens, kMaxAutoRows));
  EXPECT_NE(capped.reason.find("capped at " + std::to_string(kMaxAutoRows)), std::string::npos)
      << capped.reason;
}

TEST(BatchDefaults, ASmallGpuRunsWhatItsCacheHolds) {
  // 4 GB of cache: 4e9 / (131072 × 2048) = 14.9 rows.
  BatchChoice c = choose_batch({}, gpu(int64_t(4e9)));
  EXPECT_EQ(c.rows, 14);
  EXPECT_EQ(c.tokens, 8192);
  // A short model context counts rows at that length instead: 4e9 / (131072 × 512) = 59.
  EXPECT_EQ(choose_batch({}, gpu(int64_t(4e9), 512)).rows, 59);
  // Not even one row at the typical context: one row, never zero.
  EXPECT_EQ(choose_batch({}, gpu(int64_t(1e6))).rows, 1);
  EXPECT_EQ(choose_batch({}, gpu(-5)).rows, 1);
}

TEST(BatchDefaults, TheCpuTakesTheMeasuredCounts) {
  BatchFacts cpu{.gpu = false, .kv_bytes_available = int64_t(4e9), .kv_bytes_per_token = 4096,
                 .max_model_len = 1024};
  BatchChoice c = choose_batch({}, cpu);
  EXPECT_EQ(c.rows, kCpuAutoRows);
  EXPECT_EQ(c.tokens, kCpuAutoTokens);
  EXPECT_NE(c.reason.find("measured"), std::string::npos) << c.reason;
}

TEST(BatchDefaults, AnExplicitNumberWins) {
  BatchChoice serial = choose_batch({.rows = 1}, gpu(int64_t(110e9)));
  EXPECT_EQ(serial.rows, 1);
  EXPECT_EQ(serial.tokens, 8192);
  BatchChoice both = choose_batch({.rows = 3, .tokens = 64}, gpu(int64_t(110e9)));
  EXPECT_EQ(both.rows, 3);
  EXPECT_EQ(both.tokens, 64);
  EXPECT_NE(both.reason.find("--batch"), std::string::npos);
  // Auto tokens always cover a decode step of every row.
  BatchFacts cpu{.gpu = false, .kv_bytes_available = 1, .kv_bytes_per_token = 1, .max_model_len = 8};
  EXPECT_EQ(choose_batch({.rows = 1000}, cpu).tokens, 1000);
}

TEST(BatchDefaults, ParsesAutoOrAPositiveCount) {
  EXPECT_EQ(parse_auto_count("auto", "--batch"), std::nullopt);
  EXPECT_EQ(parse_auto_count("64", "--batch"), 64);
  for (const char* bad : {"0", "-3", "x", "8x", "", "auto "})
    EXPECT_THROW(parse_auto_count(bad, "--batch"), Error) << bad;
}

}  // namespace batch_defaults_test
}  // namespace tandem
