// KvBlockManager: per-group pools, and window groups releasing what left the window.
// Expected tables are derived by hand from "a query at p sees keys (p − window, p]".
#include "kv/kv_block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "grow_tables.h"

namespace tandem {
namespace kv_block_manager_test {

constexpr int32_t kNull = BlockPool::kNullBlock;

// Group 0: full attention, group 1: a window of 6; blocks of 4 tokens.
KvBlockManager full_and_window(int full_blocks, int window_blocks, int window = 6) {
  std::vector<KvLayerKind> layers{{window}, {0}};
  return KvBlockManager(make_kv_groups(layers), std::vector<int>{full_blocks, window_blocks}, 4);
}

int non_null(const std::vector<int32_t>& table) {
  return int(std::count_if(table.begin(), table.end(), [](int32_t b) { return b != kNull; }));
}

TEST(KvBlockManager, WindowGroupReleasesBlocksNoQueryCanSee) {
  KvBlockManager kv = full_and_window(20, 10);
  BlockTables t;
  test::grow(kv, t, 0, 10, 10);  // a 10-token prompt
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].size(), 3u);
  EXPECT_EQ(non_null(t[1]), 3);
  // Next query at 10 sees (4, 10]: block 0 (0..3) is dead, block 1 (4..7) still holds 5..7.
  EXPECT_EQ(kv.release_out_of_window(t, 10), 1);
  EXPECT_EQ(t[1][0], kNull);
  EXPECT_NE(t[1][1], kNull);
  EXPECT_EQ(kv.pool(1).num_used(), 2);
  EXPECT_EQ(kv.pool(0).num_used(), 3);  // full attention keeps everything
  test::grow(kv, t, 10, 13);
  EXPECT_EQ(t[0].size(), 4u);
  EXPECT_EQ(t[1].size(), 4u);
  // At 12 the oldest visible key is 7, in block 1; at 14 it is 9, in block 2.
  EXPECT_EQ(kv.release_out_of_window(t, 12), 0);
  EXPECT_EQ(kv.release_out_of_window(t, 14), 1);
  EXPECT_EQ(t[1][1], kNull);
  EXPECT_EQ(kv.release_out_of_window(t, 14), 0);  // idempotent
  EXPECT_EQ(kv.pool(1).num_used(), 2);
  EXPECT_EQ(kv.num_used(), 4 + 2);
  kv.release(t);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(KvBlockManager, ReservationAppliesToFullGroupsOnly) {
  KvBlockManager kv = full_and_window(20, 10);
  BlockTables t;
  test::grow(kv, t, 0, 4, 30);        // first chunk of 4 of a 30-token prompt
  EXPECT_EQ(t[0].size(), 8u);  // the whole prompt, as admission requires
  EXPECT_EQ(t[1].size(), 1u);  // only what the chunk writes
  kv.release(t);
}

TEST(KvBlockManager, GrowingPastTheWindowPadsWithNullBlocks) {
  KvBlockManager kv = full_and_window(20, 10);
  BlockTables t;
  // 20 tokens already cached elsewhere (a shared prefix); 2 more: queries at 20, 21 see
  // keys from 15 on, so the window group needs blocks 3..5 only.
  test::grow(kv, t, 20, 22);
  ASSERT_EQ(t[1].size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(t[1].begin(), t[1].begin() + 3),
            (std::vector<int32_t>{kNull, kNull, kNull}));
  EXPECT_EQ(non_null(t[1]), 3);
  EXPECT_EQ(kv.pool(1).num_used(), 3);
  kv.release(t);
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(KvBlockManager, EveryGroupMustFit) {
  KvBlockManager kv = full_and_window(20, 3);  // two usable window blocks
  BlockTables t;
  EXPECT_TRUE(kv.plan_grow(t, 0, 8).has_value());
  EXPECT_FALSE(kv.plan_grow(t, 0, 9).has_value());  // needs a third window block
  EXPECT_THROW(test::grow(kv, t, 0, 9), Error);
  EXPECT_EQ(kv.num_used(), 0);
  test::grow(kv, t, 0, 8);
  // Once the window has moved on, the released block makes room.
  kv.release_out_of_window(t, 8);  // the query at 8 sees (2, 8]: block 0 keeps 3
  EXPECT_FALSE(kv.plan_grow(t, 8, 9).has_value());
  kv.release_out_of_window(t, 9);  // at 9 it sees (3, 9]: block 0 is dead
  EXPECT_TRUE(kv.plan_grow(t, 9, 10).has_value());
  kv.release(t);
}

// A plan states what it allocates, and applies only to the tables it was made for.
TEST(KvBlockManager, PlanSaysWhatApplyAllocates) {
  KvBlockManager kv = full_and_window(20, 10);
  BlockTables t;
  std::optional<GrowPlan> plan = kv.plan_grow(t, 0, 10, 10);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->num_new_blocks(), 3 + 3);
  EXPECT_EQ(kv.num_used(), 0);  // planning takes nothing
  kv.apply(t, *plan);
  EXPECT_EQ(kv.num_used(), 6);
  EXPECT_THROW(kv.apply(t, *plan), Error);  // the tables have moved on
  kv.release(t);
}

TEST(KvBlockManager, ReleasedBlocksServeOtherSequences) {
  KvBlockManager kv = full_and_window(20, 4);
  BlockTables a, b;
  test::grow(kv, a, 0, 12);
  EXPECT_FALSE(kv.plan_grow(b, 0, 4).has_value());
  int32_t oldest = a[1][0];
  kv.release_out_of_window(a, 12);  // sees (6, 12]: blocks 0 (0..3) dead, 1 (4..7) kept
  ASSERT_TRUE(kv.plan_grow(b, 0, 4).has_value());
  test::grow(kv, b, 0, 4);
  EXPECT_EQ(b[1][0], oldest);
  EXPECT_EQ(std::count(a[1].begin(), a[1].end(), b[1][0]), 0);  // no block in two tables
  kv.release(a);
  kv.release(b);
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(KvBlockManager, TotalsAddTheGroupsUp) {
  KvBlockManager kv = full_and_window(20, 10);
  EXPECT_EQ(kv.capacity(), 19 + 9);
  EXPECT_EQ(kv.num_free(), kv.capacity());
  EXPECT_EQ(kv.max_sequence_tokens(), 19 * 4);  // only the full group limits a sequence
  EXPECT_EQ(kv.num_blocks(), (std::vector<int>{20, 10}));
  std::vector<KvLayerKind> sliding_only{{6}};
  KvBlockManager mistral(make_kv_groups(sliding_only), std::vector<int>{5}, 4);
  EXPECT_EQ(mistral.max_sequence_tokens(), INT64_MAX);
}

TEST(KvBlockManager, SlidingOnlySequenceOutgrowsItsPool) {
  // Four usable blocks of 4 hold 16 tokens, yet a 100-token sequence decodes through a
  // window of 6 one token at a time: at most 3 blocks are ever live.
  std::vector<KvLayerKind> sliding_only{{6}};
  KvBlockManager kv(make_kv_groups(sliding_only), std::vector<int>{5}, 4);
  BlockTables t;
  for (int nc = 0; nc < 100; nc++) {
    kv.release_out_of_window(t, nc);
    ASSERT_TRUE(kv.plan_grow(t, nc, nc + 1).has_value()) << "at " << nc;
    test::grow(kv, t, nc, nc + 1);
    EXPECT_LE(kv.num_used(), 3);
  }
  EXPECT_EQ(t[0].size(), 25u);
  kv.release(t);
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(KvBlockManager, MaxStepTokensCountsTheWindowOnlyForSequencesLongerThanThePool) {
  // A window of 24 in blocks of 4, three blocks (the null block and two usable: 8 tokens).
  std::vector<KvLayerKind> layers{{24}, {0}};
  KvBlockManager kv(make_kv_groups(layers), std::vector<int>{20, 3}, 4);
  // A long sequence keeps up to 24 tokens behind a step: nothing is left for the step.
  EXPECT_EQ(kv.max_step_tokens(), 0);
  EXPECT_EQ(kv.max_step_tokens(100), 0);
  // A sequence the pool holds whole never waits on its window (what `generate --image`
  // sizes its cache for: prompt + max_tokens).
  EXPECT_EQ(kv.max_step_tokens(8), INT64_MAX);
  EXPECT_EQ(kv.max_step_tokens(9), 0);
  KvBlockManager big(make_kv_groups(layers), std::vector<int>{20, 12}, 4);  // 11 usable
  EXPECT_EQ(big.max_step_tokens(), (11 - 7) * 4);  // 24 behind: (24 + 2) / 4 + 1 = 7 blocks
}

}  // namespace kv_block_manager_test
}  // namespace tandem
