#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"

namespace tandem {
namespace block_pool_test {

TEST(BlockPool, NullBlockIsNeverHandedOut) {
  BlockPool pool(5);
  EXPECT_EQ(pool.capacity(), 4);
  auto blocks = pool.allocate(4);
  EXPECT_EQ(std::count(blocks.begin(), blocks.end(), BlockPool::kNullBlock), 0);
  EXPECT_FALSE(pool.can_allocate(1));
  EXPECT_THROW(pool.allocate(1), Error);
}

TEST(BlockPool, RefCountsKeepSharedBlocksAlive) {
  BlockPool pool(4);
  auto a = pool.allocate(2);
  pool.add_ref(a[0]);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2);  // a[0] still referenced once
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  pool.release(std::vector<int32_t>{a[0]});
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_THROW(pool.release(std::vector<int32_t>{a[0]}), Error);  // double free is caught
}

TEST(BlockPool, FreedBlocksAreReusedOldestFirst) {
  BlockPool pool(4);
  auto a = pool.allocate(3);
  pool.release(std::vector<int32_t>{a[2]});
  pool.release(std::vector<int32_t>{a[0]});
  auto b = pool.allocate(2);
  EXPECT_EQ(b[0], a[2]);
  EXPECT_EQ(b[1], a[0]);
}

TEST(BlockPool, BlocksForRoundsUp) {
  EXPECT_EQ(blocks_for(0, 16), 0);
  EXPECT_EQ(blocks_for(1, 16), 1);
  EXPECT_EQ(blocks_for(16, 16), 1);
  EXPECT_EQ(blocks_for(17, 16), 2);
}

}  // namespace block_pool_test
}  // namespace tandem
