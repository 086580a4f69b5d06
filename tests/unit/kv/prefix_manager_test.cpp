// KvBlockManager with the prefix cache: hits per group, hand-derived from "a query at p
// sees keys (p − window, p]" (blocks of 4 tokens), the admission check, and eviction.
#include <gtest/gtest.h>

#include "kv/kv_block_manager.h"

namespace tandem {
namespace prefix_manager_test {

constexpr int32_t kNull = BlockPool::kNullBlock;
constexpr int kBs = 4;

KvBlockManager manager(std::vector<KvLayerKind> layers, std::vector<int> blocks) {
  return KvBlockManager(make_kv_groups(layers), blocks, kBs, /*prefix_caching=*/true);
}

std::vector<int32_t> tokens_from(int n, int32_t first) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; i++) out.push_back(first + i);
  return out;
}

struct Seq {
  std::vector<int32_t> tokens;
  BlockHashChain chain{prefix_root({})};
  BlockTables tables;
  int computed = 0;
};

// Admits `s` from its longest hit (short of its last token) and computes all of it, one
// block at a time, releasing what leaves the window; its blocks are named as they fill.
// Returns the hit in blocks.
int run(KvBlockManager& kv, Seq& s, int keep_blocks) {
  s.chain.extend(s.tokens, kBs);
  const int n = int(s.tokens.size());
  PrefixHit hit = kv.find_prefix(s.chain, s.tokens, (n - 1) / kBs);
  std::optional<GrowPlan> plan = kv.plan_admit(hit, std::min(n, hit.num_blocks * kBs + kBs), n);
  if (!plan) ADD_FAILURE() << "no blocks to admit";
  kv.apply(s.tables, *plan);
  s.computed = std::min(n, hit.num_blocks * kBs + kBs);
  while (s.computed < n) {
    kv.cache_blocks(s.tables, s.chain, s.tokens, 0, s.computed / kBs);
    kv.release_out_of_window(s.tables, s.computed, keep_blocks);
    const int next = std::min(n, s.computed + kBs);
    std::optional<GrowPlan> grow = kv.plan_grow(s.tables, s.computed, next);
    if (!grow) ADD_FAILURE() << "no blocks to grow";
    kv.apply(s.tables, *grow);
    s.computed = next;
  }
  kv.cache_blocks(s.tables, s.chain, s.tokens, 0, s.computed / kBs);
  return hit.num_blocks;
}

TEST(PrefixManager, FullGroupHitIsTheLongestCachedChainShortOfTheLastToken) {
  KvBlockManager kv = manager({{0}}, {20});
  Seq a{.tokens = tokens_from(12, 0)};
  EXPECT_EQ(run(kv, a, 0), 0);
  const std::vector<int32_t> a_blocks = a.tables[0];
  kv.release(a.tables);
  EXPECT_EQ(kv.num_cached(), 3);
  EXPECT_EQ(kv.num_used(), 0);
  Seq b{.tokens = tokens_from(10, 0)};
  b.tokens.push_back(500);  // block 2 differs at its third token
  b.tokens.push_back(501);
  b.chain.extend(b.tokens, kBs);
  PrefixHit hit = kv.find_prefix(b.chain, b.tokens, 3);
  ASSERT_EQ(hit.num_blocks, 2);
  EXPECT_EQ(hit.tables[0], (std::vector<int32_t>{a_blocks[0], a_blocks[1]}));
  // The same 12 tokens again: block 2 matches, but the last token must be computed.
  Seq same{.tokens = a.tokens};
  same.chain.extend(same.tokens, kBs);
  EXPECT_EQ(kv.find_prefix(same.chain, same.tokens, (12 - 1) / kBs).num_blocks, 2);
  // Another salt shares nothing.
  Seq salted{.tokens = a.tokens, .chain = BlockHashChain(prefix_root({.cache_salt = "s"}))};
  salted.chain.extend(salted.tokens, kBs);
  EXPECT_EQ(kv.find_prefix(salted.chain, salted.tokens, 3).num_blocks, 0);
}

TEST(PrefixManager, WindowGroupNeedsOnlyTheBlocksTheHitPointSees) {
  // Window 6: a query at 16 sees (10, 16], blocks 2 and 3. A keeps nothing of its prompt
  // (keep 0), so blocks 0 and 1 leave uncached; the hit at 16 needs neither.
  KvBlockManager kv = manager({{6}}, {12});
  Seq a{.tokens = tokens_from(22, 0)};
  run(kv, a, /*keep_blocks=*/0);
  EXPECT_EQ(a.tables[0][0], kNull);
  EXPECT_EQ(a.tables[0][1], kNull);
  const std::vector<int32_t> a_blocks = a.tables[0];
  kv.release(a.tables);
  Seq b{.tokens = tokens_from(16, 0)};
  b.tokens.push_back(700);
  b.chain.extend(b.tokens, kBs);
  PrefixHit hit = kv.find_prefix(b.chain, b.tokens, (17 - 1) / kBs);
  ASSERT_EQ(hit.num_blocks, 4);
  EXPECT_EQ(hit.tables[0], (std::vector<int32_t>{kNull, kNull, a_blocks[2], a_blocks[3]}));
  // A hit at 8 would need blocks 0 and 1 ((2, 8]): not cached, so a request diverging in
  // block 2 gets nothing.
  Seq c{.tokens = tokens_from(9, 0)};
  c.tokens.push_back(800);
  c.chain.extend(c.tokens, kBs);
  EXPECT_EQ(kv.find_prefix(c.chain, c.tokens, 2).num_blocks, 0);
}

TEST(PrefixManager, PromptBlocksStayCachedWhenTheyLeaveTheWindow) {
  KvBlockManager kv = manager({{0}, {6}}, {20, 12});
  Seq a{.tokens = tokens_from(22, 0)};
  run(kv, a, /*keep_blocks=*/22 / kBs);
  kv.release(a.tables);
  Seq c{.tokens = tokens_from(9, 0)};
  c.tokens.push_back(800);
  c.chain.extend(c.tokens, kBs);
  PrefixHit hit = kv.find_prefix(c.chain, c.tokens, 2);
  ASSERT_EQ(hit.num_blocks, 2);
  EXPECT_EQ(hit.tables[1][0] != kNull && hit.tables[1][1] != kNull, true);
  EXPECT_EQ(kv.pool(0).num_used() + kv.pool(1).num_used(), 0);
}

TEST(PrefixManager, AdmissionCountsFreeHitBlocksAsConsumed) {
  KvBlockManager kv = manager({{0}}, {5});  // 4 usable blocks
  Seq a{.tokens = tokens_from(8, 0)};
  run(kv, a, 0);
  kv.release(a.tables);
  ASSERT_EQ(kv.pool(0).num_free(), 4);
  ASSERT_EQ(kv.num_cached(), 2);
  // 16 tokens: the 2 hit blocks (free) and 2 new ones: exactly the pool.
  Seq b{.tokens = tokens_from(16, 0)};
  b.chain.extend(b.tokens, kBs);
  PrefixHit hit = kv.find_prefix(b.chain, b.tokens, 3);
  ASSERT_EQ(hit.num_blocks, 2);
  std::optional<GrowPlan> fits = kv.plan_admit(hit, 16, 16);
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->groups[0].num_new, 2);
  EXPECT_EQ(fits->groups[0].num_hit_free, 2);
  // 20 tokens: 3 new would fit the 4 free blocks, but 2 of them are the hit itself.
  Seq c{.tokens = tokens_from(20, 0)};
  c.chain.extend(c.tokens, kBs);
  EXPECT_FALSE(kv.plan_admit(kv.find_prefix(c.chain, c.tokens, 4), 20, 20));
  kv.apply(b.tables, *fits);
  EXPECT_EQ(kv.num_used(), 4);
  EXPECT_EQ(kv.num_cached(), 0);
}

TEST(PrefixManager, AFullPoolEvictsCachedBlocksLeastRecentlyUsedTailFirst) {
  KvBlockManager kv = manager({{0}}, {7});  // 6 usable blocks
  Seq a{.tokens = tokens_from(12, 0)}, b{.tokens = tokens_from(12, 100)};
  run(kv, a, 0);
  run(kv, b, 0);
  const std::vector<int32_t> a_blocks = a.tables[0];
  kv.release(a.tables);
  kv.release(b.tables);
  ASSERT_EQ(kv.num_cached(), 6);
  // A new request needing 2 blocks evicts a's tail first: a's blocks 2 then 1.
  Seq c{.tokens = tokens_from(8, 300)};
  run(kv, c, 0);
  EXPECT_EQ(c.tables[0], (std::vector<int32_t>{a_blocks[2], a_blocks[1]}));
  EXPECT_EQ(kv.num_cached(), 4);
  Seq again{.tokens = a.tokens};
  again.chain.extend(again.tokens, kBs);
  EXPECT_EQ(kv.find_prefix(again.chain, again.tokens, 2).num_blocks, 1);  // a's block 0 survives
}

// vLLM's lesson (#43447): a long generation on a window group frees the blocks leaving its
// window at the free-list head, and reuses them itself, so the prefixes others left
// cached survive it. Were they cached at the tail, the generation would flush them.
TEST(PrefixManager, ALongGenerationDoesNotFlushOthersWindowBlocks) {
  for (bool cache_generated : {false, true}) {
    SCOPED_TRACE(cache_generated ? "generated blocks cached" : "generated blocks freed first");
    KvBlockManager kv = manager({{6}}, {12});  // 11 usable blocks
    Seq a{.tokens = tokens_from(30, 0)};
    run(kv, a, 30 / kBs);
    kv.release(a.tables);
    Seq again{.tokens = a.tokens};
    again.chain.extend(again.tokens, kBs);
    ASSERT_EQ(kv.find_prefix(again.chain, again.tokens, 7).num_blocks, 7);
    Seq b{.tokens = tokens_from(8, 900)};
    for (int i = 0; i < 200; i++) b.tokens.push_back(2000 + i);  // 200 generated tokens
    run(kv, b, cache_generated ? 1 << 20 : 8 / kBs);
    kv.release(b.tables);
    EXPECT_EQ(kv.find_prefix(again.chain, again.tokens, 7).num_blocks, cache_generated ? 0 : 7);
  }
}

TEST(PrefixManager, OffMeansNoNamesNoHits) {
  KvBlockManager kv(make_kv_groups(std::vector<KvLayerKind>{{0}}), std::vector<int>{10}, kBs);
  Seq a{.tokens = tokens_from(12, 0)};
  run(kv, a, 0);
  kv.release(a.tables);
  EXPECT_EQ(kv.num_cached(), 0);
  Seq b{.tokens = a.tokens};
  b.chain.extend(b.tokens, kBs);
  EXPECT_EQ(kv.find_prefix(b.chain, b.tokens, 2).num_blocks, 0);
}

}  // namespace prefix_manager_test
}  // namespace tandem
