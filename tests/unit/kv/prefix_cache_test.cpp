// Prefix-cache keys and the pool's named blocks: chained hashes, verified lookups,
// eviction on allocation, and the free-list order of cached and uncached blocks.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <set>

#include "kv/block_pool.h"

namespace tandem {
namespace prefix_cache_test {

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; i++) out.push_back(first + i);
  return out;
}

TEST(PrefixCache, ChainsDependOnEveryEarlierTokenAndTheSalt) {
  const std::vector<int32_t> a = iota_tokens(12, 1);
  std::vector<int32_t> b = a;
  b[1] = 99;  // differs in block 0 only
  BlockHashChain ca(prefix_root({})), cb(prefix_root({})), cs(prefix_root({.cache_salt = "x"}));
  ca.extend(a, 4);
  cb.extend(b, 4);
  cs.extend(a, 4);
  ASSERT_EQ(ca.size(), 3);
  for (int i = 0; i < 3; i++) {
    EXPECT_NE(ca.hashes()[size_t(i)], cb.hashes()[size_t(i)]) << "block " << i;
    EXPECT_NE(ca.hashes()[size_t(i)], cs.hashes()[size_t(i)]) << "block " << i;
  }
  BlockHashChain again(prefix_root({}));
  again.extend(std::span(a).first(9), 4);  // two full blocks, then the rest
  EXPECT_EQ(again.size(), 2);
  again.extend(a, 4);
  EXPECT_TRUE(std::ranges::equal(again.hashes(), ca.hashes()));
  EXPECT_NE(prefix_root({.cache_salt = "ab"}), prefix_root({.cache_salt = "a", .adapter = "b"}));
}

TEST(PrefixCache, HashesOfManyBlocksDoNotCollide) {
  std::set<BlockHash> seen;
  for (int32_t first = 0; first < 20000; first++)
    seen.insert(hash_block(7, iota_tokens(16, first)));
  EXPECT_EQ(seen.size(), 20000u);
}

TEST(PrefixCache, LookupVerifiesTokensAndParentNotOnlyTheHash) {
  BlockPool pool(4);
  const int32_t b = pool.allocate(1)[0];
  const std::vector<int32_t> tokens = iota_tokens(4, 10), other = iota_tokens(4, 20);
  ASSERT_TRUE(pool.cache(b, {.hash = 42, .parent = 1, .tokens = tokens}));
  EXPECT_EQ(pool.lookup({.hash = 42, .parent = 1, .tokens = tokens}), b);
  EXPECT_FALSE(pool.lookup({.hash = 42, .parent = 1, .tokens = other}));  // a forged collision
  EXPECT_FALSE(pool.lookup({.hash = 42, .parent = 2, .tokens = tokens}));
  EXPECT_FALSE(pool.lookup({.hash = 43, .parent = 1, .tokens = tokens}));
  // A second block with the same content stays unnamed: the first keeps the hash.
  const int32_t c = pool.allocate(1)[0];
  EXPECT_FALSE(pool.cache(c, {.hash = 42, .parent = 1, .tokens = tokens}));
  EXPECT_FALSE(pool.named(c));
}

TEST(PrefixCache, FreedNamedBlocksStayCachedUntilAllocationEvictsThem) {
  BlockPool pool(4);  // 3 usable
  const std::vector<int32_t> held = pool.allocate(3);
  const std::vector<int32_t> tokens = iota_tokens(4, 0);
  ASSERT_TRUE(pool.cache(held[0], {.hash = 5, .parent = 0, .tokens = tokens}));
  pool.release(std::vector<int32_t>{held[0]});
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_EQ(pool.lookup({.hash = 5, .parent = 0, .tokens = tokens}), held[0]);
  pool.add_ref(held[0]);  // a hit takes it back from the free list
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_cached(), 0);
  pool.release(std::vector<int32_t>{held[0]});
  // An uncached block goes to the head, so it is reused before the cached one.
  pool.release_first(std::vector<int32_t>{held[1]});
  EXPECT_EQ(pool.free_blocks(), (std::vector<int32_t>{held[1], held[0]}));
  EXPECT_EQ(pool.allocate(1)[0], held[1]);
  EXPECT_EQ(pool.num_evictions(), 0);
  EXPECT_EQ(pool.allocate(1)[0], held[0]);  // evicted
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_FALSE(pool.named(held[0]));
  EXPECT_FALSE(pool.lookup({.hash = 5, .parent = 0, .tokens = tokens}));
  EXPECT_EQ(pool.num_cached(), 0);
}

TEST(PrefixCache, ReleaseFirstDropsTheName) {
  BlockPool pool(3);
  const int32_t b = pool.allocate(1)[0];
  const std::vector<int32_t> tokens = iota_tokens(4, 0);
  ASSERT_TRUE(pool.cache(b, {.hash = 9, .parent = 0, .tokens = tokens}));
  pool.add_ref(b);
  pool.release_first(std::vector<int32_t>{b});  // still held once: keeps its name
  EXPECT_TRUE(pool.named(b));
  pool.release_first(std::vector<int32_t>{b});
  EXPECT_FALSE(pool.named(b));
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.free_blocks().front(), b);
}

}  // namespace prefix_cache_test
}  // namespace tandem
