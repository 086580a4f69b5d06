// KV sizing: the window-group bound is checked against brute force over every alignment
// and every split of a step's tokens among rows; the budget split by hand.
#include "kv/kv_budget.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "kv/block_pool.h"

namespace tandem {
namespace kv_budget_test {

// Blocks a row at num_computed `nc` touches when it computes `n` tokens under `window`:
// the blocks of every key its queries see and of every key it writes, counted one by one.
int live_blocks(int nc, int n, int window, int bs) {
  std::set<int> blocks;
  for (int p = nc; p < nc + n; p++)
    for (int key = std::max(0, p - window + 1); key <= p; key++) blocks.insert(key / bs);
  for (int key = std::max(0, nc - window + 1); key < nc; key++) blocks.insert(key / bs);
  return int(blocks.size());
}

KvSizing sizing(int bs, int rows, int step_tokens, int max_len) {
  return {.block_size = bs, .max_rows = rows, .max_batched_tokens = step_tokens, .max_model_len = max_len};
}

TEST(KvBudget, OneRowWindowBoundIsTightAndSufficient) {
  for (int bs : {4, 16})
    for (int window : {6, 8, 24, 33})
      for (int step : {1, 4, 7, 20}) {
        KvSizing s = sizing(bs, 1, step, 1 << 20);
        int worst = 0;
        for (int nc = 0; nc < 3 * window + 2 * bs; nc++)
          for (int n = 1; n <= step; n++) worst = std::max(worst, live_blocks(nc, n, window, bs));
        int usable = window_group_blocks(window, 1, s) - 1;
        EXPECT_GE(usable, worst) << "bs " << bs << " window " << window << " step " << step;
        EXPECT_LE(usable - worst, 1) << "bs " << bs << " window " << window << " step " << step;
      }
}

TEST(KvBudget, WindowBoundHoldsForAnySplitOfTheStep) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; trial++) {
    int bs = trial % 2 ? 4 : 16, rows = 1 + int(rng() % 6), window = 1 + int(rng() % 50);
    int step = 1 + int(rng() % 64);
    KvSizing s = sizing(bs, rows, step, 1 << 20);
    int left = step, total = 0;
    for (int r = 0; r < rows; r++) {
      int n = r + 1 == rows ? left : int(rng() % (left + 1));
      left -= n;
      int nc = int(rng() % 300);
      total += live_blocks(nc, n, window, bs);  // n = 0: a row left out of this step
    }
    ASSERT_LE(total, window_group_blocks(window, rows, s) - 1)
        << "trial " << trial << " rows " << rows << " window " << window << " step " << step;
  }
}

// With the prefix cache a window group holds one block more behind each row's window
// (the held window), and is sized for it.
TEST(KvBudget, PrefixCachingSizesWindowGroupsForTheHeldWindow) {
  KvGroups g = make_kv_groups(std::vector<KvLayerKind>{{8}, {0}});
  std::vector<int64_t> bytes{10, 5};
  KvSizing s = sizing(4, 3, 16, 1000);
  s.prefix_caching = true;
  EXPECT_EQ(held_window(8, s), 12);
  EXPECT_EQ(plan_group_blocks(g, bytes, s)[1], window_group_blocks(12, 3, s));
  EXPECT_GT(window_group_blocks(12, 3, s), window_group_blocks(8, 3, s));
}

TEST(KvBudget, WindowWiderThanTheContextCostsNoMoreThanFullLength) {
  KvSizing s = sizing(16, 2, 2048, 40);
  EXPECT_EQ(window_group_blocks(4096, 2, s), 2 * blocks_for(40, 16) + 1);
}

TEST(KvBudget, WithoutWindowsTheBudgetIsAsBefore) {
  KvGroups g = make_kv_groups(std::vector<KvLayerKind>{{0}, {0}});
  std::vector<int64_t> bytes{100};
  KvSizing s = sizing(16, 4, 2048, 1000);
  EXPECT_EQ(plan_group_blocks(g, bytes, s), (std::vector<int>{blocks_for(4000, 16) + 1}));
  s.budget_bytes = 950;
  EXPECT_EQ(plan_group_blocks(g, bytes, s), (std::vector<int>{10}));
  s.budget_bytes = 1;
  EXPECT_EQ(plan_group_blocks(g, bytes, s), (std::vector<int>{2}));
}

TEST(KvBudget, WindowGroupsTakeTheirBoundAndTheFullGroupTheRest) {
  KvGroups g = make_kv_groups(std::vector<KvLayerKind>{{8}, {0}});
  std::vector<int64_t> bytes{10, 5};  // [full, window]
  KvSizing s = sizing(4, 2, 4, 100);
  // Window: per row ⌈(8 + 2)/4⌉ + 1 = 4, two rows 8, + ⌈4/4⌉ − 1 = 8 live, + null = 9.
  EXPECT_EQ(window_group_blocks(8, 2, s), 9);
  s.budget_bytes = 1000;
  EXPECT_EQ(plan_group_blocks(g, bytes, s), (std::vector<int>{(1000 - 45) / 10 + 1, 9}));
  // Too small for two rows' windows: sized for one (4 + 1 − 1 live + null = 5 blocks).
  s.budget_bytes = 45;
  EXPECT_EQ(plan_group_blocks(g, bytes, s), (std::vector<int>{(45 - 25) / 10 + 1, 5}));
  s.budget_bytes = std::nullopt;
  EXPECT_EQ(plan_group_blocks(g, bytes, s), (std::vector<int>{blocks_for(200, 4) + 1, 9}));
  EXPECT_EQ(kv_bytes(std::vector<int>{3, 5}, bytes), 3 * 10 + 5 * 5);
}

TEST(KvBudget, SlidingOnlyModelNeedsNoFullGroup) {
  KvGroups g = make_kv_groups(std::vector<KvLayerKind>{{8}});
  KvSizing s = sizing(4, 2, 4, 100);
  EXPECT_EQ(plan_group_blocks(g, std::vector<int64_t>{5}, s), (std::vector<int>{9}));
}

}  // namespace kv_budget_test
}  // namespace tandem
