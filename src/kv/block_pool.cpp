#include "kv/block_pool.h"

#include "core/error.h"

namespace tandem {

BlockPool::BlockPool(int num_blocks) : ref_counts_(size_t(num_blocks), 0) {
  TANDEM_CHECK(num_blocks >= 2, "a block pool needs at least 2 blocks (got {})", num_blocks);
  ref_counts_[kNullBlock] = 1;  // pinned forever
  for (int32_t b = 1; b < num_blocks; b++) free_.push_back(b);
}

std::vector<int32_t> BlockPool::allocate(int n) {
  TANDEM_CHECK(can_allocate(n), "allocate {} blocks with {} free", n, num_free());
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  for (int i = 0; i < n; i++) {
    int32_t b = free_.front();
    free_.pop_front();
    ref_counts_[size_t(b)] = 1;
    out.push_back(b);
  }
  return out;
}

void BlockPool::add_ref(int32_t block) {
  TANDEM_CHECK(block > 0 && block < num_blocks() && ref_counts_[size_t(block)] > 0,
               "add_ref of block {}", block);
  ref_counts_[size_t(block)]++;
}

void BlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    if (b == kNullBlock) continue;
    TANDEM_CHECK(b > 0 && b < num_blocks() && ref_counts_[size_t(b)] > 0, "release of block {}",
                 b);
    if (--ref_counts_[size_t(b)] == 0) free_.push_back(b);
  }
}

}  // namespace tandem
