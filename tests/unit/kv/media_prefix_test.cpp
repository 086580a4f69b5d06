// The prefix cache with images: an image's content hash mixes into every block its tokens
// overlap (and, through the chain, every block after), so the same placeholder tokens with
// another image never hit; a hit never ends inside an image.
#include <gtest/gtest.h>

#include "kv/kv_block_manager.h"

namespace tandem {
namespace media_prefix_test {

constexpr int kBs = 4;

std::vector<int32_t> tokens(int n) {
  return std::vector<int32_t>(size_t(n), 9);
}

TEST(MediaPrefix, AnImageChangesTheBlocksItOverlapsAndEveryOneAfter) {
  const std::vector<int32_t> t = tokens(20);
  BlockHashChain plain(prefix_root({})), a(prefix_root({}), {{6, 10, 111}}),
      b(prefix_root({}), {{6, 10, 222}}), a2(prefix_root({}), {{6, 10, 111}});
  for (BlockHashChain* c : {&plain, &a, &b, &a2}) c->extend(t, kBs);
  // Block 0 ([0, 4)) holds no image: the same hash with or without one.
  EXPECT_EQ(a.hashes()[0], plain.hashes()[0]);
  EXPECT_EQ(a.hashes()[0], b.hashes()[0]);
  for (int blk = 1; blk < 5;
       blk++) {  // [4, 8) and [8, 12) overlap the image; the rest chain on them
    EXPECT_NE(a.hashes()[size_t(blk)], b.hashes()[size_t(blk)]) << blk;
    EXPECT_NE(a.hashes()[size_t(blk)], plain.hashes()[size_t(blk)]) << blk;
    EXPECT_EQ(a.hashes()[size_t(blk)], a2.hashes()[size_t(blk)]) << blk;
  }
}

struct Cached {
  KvBlockManager kv{make_kv_groups(std::vector<KvLayerKind>{{0}}), std::vector<int>{32}, kBs, true};
};

// Names the blocks of a sequence computed whole, and releases it.
void compute(KvBlockManager& kv, const BlockHashChain& chain, const std::vector<int32_t>& t) {
  BlockTables tables;
  kv.apply(tables, *kv.plan_grow(tables, 0, int(t.size())));
  kv.cache_blocks(tables, chain, t, 0, int(t.size()) / kBs);
  kv.release(tables);
}

TEST(MediaPrefix, AnotherImageBehindTheSameTokensNeverHits) {
  Cached c;
  const std::vector<int32_t> t = tokens(20);
  const std::vector<TokenRange> image_a{{6, 10, 111}}, image_b{{6, 10, 222}};
  BlockHashChain a(prefix_root({}), image_a), b(prefix_root({}), image_b);
  a.extend(t, kBs);
  b.extend(t, kBs);
  compute(c.kv, a, t);
  EXPECT_EQ(c.kv.find_prefix(a, t, 4, image_a).num_blocks, 4);  // the same image: every block
  EXPECT_EQ(c.kv.find_prefix(b, t, 4, image_b).num_blocks, 1);  // another: only [0, 4)
}

TEST(MediaPrefix, AHitNeverEndsInsideAnImage) {
  Cached c;
  const std::vector<int32_t> t = tokens(24);
  const std::vector<TokenRange> image{{5, 15, 7}};  // block boundaries 8 and 12 lie inside
  BlockHashChain chain(prefix_root({}), image);
  chain.extend(t, kBs);
  compute(c.kv, chain, t);
  EXPECT_EQ(c.kv.find_prefix(chain, t, 5, image).num_blocks, 5);  // 20: past the image
  EXPECT_EQ(c.kv.find_prefix(chain, t, 3, image).num_blocks, 1);  // 12 and 8 split it: back to 4
  EXPECT_EQ(c.kv.find_prefix(chain, t, 3).num_blocks, 3);         // without the rule, 12
}

}  // namespace media_prefix_test
}  // namespace tandem
