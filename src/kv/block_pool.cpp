#include "kv/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

BlockPool::BlockPool(int num_blocks)
    : ref_counts_(size_t(num_blocks), 0),
      prev_(size_t(num_blocks) + 1),
      next_(size_t(num_blocks) + 1),
      names_(size_t(std::max(num_blocks, 0))) {
  TANDEM_CHECK(num_blocks >= 2, "a block pool needs at least 2 blocks (got {})", num_blocks);
  prev_[size_t(sentinel())] = next_[size_t(sentinel())] = sentinel();
  ref_counts_[kNullBlock] = 1;  // pinned forever
  for (int32_t b = 1; b < num_blocks; b++) link_after(prev_[size_t(sentinel())], b);
}

// Links a free block in after `at` (the sentinel: at the head; the tail: at the tail).
void BlockPool::link_after(int32_t at, int32_t block) {
  const int32_t after = next_[size_t(at)];
  prev_[size_t(block)] = at;
  next_[size_t(block)] = after;
  next_[size_t(at)] = block;
  prev_[size_t(after)] = block;
  num_free_++;
  if (named(block)) num_cached_++;
}

void BlockPool::unlink(int32_t block) {
  next_[size_t(prev_[size_t(block)])] = next_[size_t(block)];
  prev_[size_t(next_[size_t(block)])] = prev_[size_t(block)];
  num_free_--;
  if (named(block)) num_cached_--;
}

void BlockPool::forget(int32_t block) {
  std::optional<Name>& name = names_[size_t(block)];
  if (!name) return;
  by_hash_.erase(name->hash);
  name.reset();
}

std::vector<int32_t> BlockPool::allocate(int n) {
  TANDEM_CHECK(n >= 0 && can_allocate(n), "allocate {} blocks with {} free", n, num_free());
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  for (int i = 0; i < n; i++) {
    const int32_t b = next_[size_t(sentinel())];
    unlink(b);
    if (named(b)) num_evictions_++;
    forget(b);
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
    if (--ref_counts_[size_t(b)] == 0) link_after(prev_[size_t(sentinel())], b);
  }
}

void BlockPool::release_first(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    if (b == kNullBlock) continue;
    TANDEM_CHECK(valid(b) && ref_counts_[size_t(b)] > 0, "release of block {}", b);
    if (--ref_counts_[size_t(b)] > 0) continue;
    forget(b);
    link_after(sentinel(), b);
  }
}

std::vector<int32_t> BlockPool::free_blocks() const {
  std::vector<int32_t> out;
  for (int32_t b = next_[size_t(sentinel())]; b != sentinel(); b = next_[size_t(b)]) out.push_back(b);
  return out;
}

bool BlockPool::cache(int32_t block, const BlockKey& key) {
  TANDEM_CHECK(valid(block) && ref_counts_[size_t(block)] > 0, "cache of block {}", block);
  if (named(block) || by_hash_.contains(key.hash)) return false;
  names_[size_t(block)] = Name{key.hash, key.parent, {key.tokens.begin(), key.tokens.end()}};
  by_hash_.emplace(key.hash, block);
  return true;
}

void BlockPool::clear_names() {
  for (int32_t b = 1; b < num_blocks(); b++) names_[size_t(b)].reset();
  by_hash_.clear();
  num_cached_ = 0;
}

std::optional<int32_t> BlockPool::lookup(const BlockKey& key) const {
  auto it = by_hash_.find(key.hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Name& name = *names_[size_t(it->second)];
  if (name.parent != key.parent || !std::ranges::equal(name.tokens, key.tokens)) return std::nullopt;
  return it->second;
}

}  // namespace tandem
