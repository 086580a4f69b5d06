#include "kv/block_pool.h"

#include "core/error.h"

namespace tandem {

BlockPool::BlockPool(int num_blocks)
    : ref_counts_(size_t(num_blocks), 0),
      prev_(size_t(num_blocks) + 1),
      next_(size_t(num_blocks) + 1) {
  TANDEM_CHECK(num_blocks >= 2, "a block pool needs at least 2 blocks (got {})", num_blocks);
  prev_[size_t(sentinel())] = next_[size_t(sentinel())] = sentinel();
  ref_counts_[kNullBlock] = 1;  // pinned forever
  for (int32_t b = 1; b < num_blocks; b++) push_back(b);
}

void BlockPool::push_back(int32_t block) {
  const int32_t tail = prev_[size_t(sentinel())];
  prev_[size_t(block)] = tail;
  next_[size_t(block)] = sentinel();
  next_[size_t(tail)] = block;
  prev_[size_t(sentinel())] = block;
  num_free_++;
}

void BlockPool::unlink(int32_t block) {
  next_[size_t(prev_[size_t(block)])] = next_[size_t(block)];
  prev_[size_t(next_[size_t(block)])] = prev_[size_t(block)];
  num_free_--;
}

std::vector<int32_t> BlockPool::allocate(int n) {
  TANDEM_CHECK(n >= 0 && can_allocate(n), "allocate {} blocks with {} free", n, num_free());
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  for (int i = 0; i < n; i++) {
    const int32_t b = next_[size_t(sentinel())];
    unlink(b);
    ref_counts_[size_t(b)] = 1;
    out.push_back(b);
  }
  return out;
}

void BlockPool::add_ref(int32_t block) {
  TANDEM_CHECK(valid(block), "add_ref of block {}", block);
  if (ref_counts_[size_t(block)]++ == 0) unlink(block);
}

void BlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    if (b == kNullBlock) continue;
    TANDEM_CHECK(valid(b) && ref_counts_[size_t(b)] > 0, "release of block {}", b);
    if (--ref_counts_[size_t(b)] == 0) push_back(b);
  }
}

std::vector<int32_t> BlockPool::free_blocks() const {
  std::vector<int32_t> out;
  for (int32_t b = next_[size_t(sentinel())]; b != sentinel(); b = next_[size_t(b)]) out.push_back(b);
  return out;
}

}  // namespace tandem
