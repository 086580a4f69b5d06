// The decode attention's split plan (cuda_split_plan.h): host integers only, so these
// run on every machine, GPU or not.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_split_plan.h"

namespace tandem::attn {
namespace split_plan_test {

constexpr int kSms = 132;  // an H200
constexpr int64_t kCounters = 64 * kSms;

// Fraction of the CTA slots the plan's waves use.
double fill(int64_t items, int splits, int ctas_per_sm) {
  const int64_t slots = int64_t(kSms) * ctas_per_sm, ctas = items * splits;
  return double(ctas) / double((ctas + slots - 1) / slots * slots);
}

TEST(SplitPlan, ChunksCoverEveryKeyWithWholeTilesAndNoEmptyLiveSplit) {
  for (int splits = 1; splits <= kMaxSplits; splits += 7) {
    for (int keys = 1; keys <= 20000; keys += 37) {
      const int chunk = split_chunk(splits, keys);
      const int live = (keys + chunk - 1) / chunk;
      ASSERT_EQ(chunk % kSplitAlign, 0) << splits << " splits, " << keys << " keys";
      ASSERT_GE(chunk, kMinSplitKeys);
      ASSERT_LE(live, splits) << "keys past the last split";
      ASSERT_LT((live - 1) * chunk, keys) << "a live split without keys";
    }
  }
}

TEST(SplitPlan, PicksTheFirstSplitCountThatFillsTheWaves) {
  // offline-2048/2048: 256 rows x 8 kv heads. The e4m3 kernel (4 CTAs per SM) fills 97%
  // of its waves unsplit; at 3 CTAs per SM one split fills 86%, two fill 94%.
  EXPECT_EQ(plan_num_splits(2048, 4096, kSms, 4, kCounters), 1);
  EXPECT_EQ(plan_num_splits(2048, 4096, kSms, 3, kCounters), 2);
  EXPECT_GE(fill(2048, 2, 3), kFullWaves);
  // One token, 8 kv heads, a graph's capacity as the key bound: enough splits for 93%.
  EXPECT_EQ(plan_num_splits(8, 131072, kSms, 2, kCounters), 31);
  EXPECT_GE(fill(8, 31, 2), kFullWaves);
  EXPECT_LT(fill(8, 30, 2), kFullWaves);
}

TEST(SplitPlan, StaysWithinTheKeysTheCountersAndTheMaximum) {
  EXPECT_EQ(plan_num_splits(8, 300, kSms, 2, kCounters), 5) << "one 64-key tile per split";
  EXPECT_EQ(plan_num_splits(8, 1, kSms, 2, kCounters), 1);
  EXPECT_EQ(plan_num_splits(1, 1 << 20, kSms, 2, kCounters), kMaxSplits);
  EXPECT_EQ(plan_num_splits(kCounters + 1, 1 << 20, kSms, 2, kCounters), 1)
      << "more items than arrival counters";
  for (int64_t items : {1, 7, 100, 1000, 5000}) {
    for (int ctas : {1, 2, 3, 4}) {
      for (int keys : {1, 63, 64, 65, 1000, 100000}) {
        const int s = plan_num_splits(items, keys, kSms, ctas, kCounters);
        ASSERT_GE(s, 1);
        ASSERT_LE(s, std::min(kMaxSplits, (keys + kMinSplitKeys - 1) / kMinSplitKeys));
        // Never a count below s that already fills the waves.
        for (int t = 1; t < s; t++) ASSERT_LT(fill(items, t, ctas), kFullWaves) << items;
      }
    }
  }
}

}  // namespace split_plan_test
}  // namespace tandem::attn
