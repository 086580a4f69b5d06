// BlockPool: the KV cache's fixed blocks, by id. It knows ids and reference counts,
// never tensors (the runner owns the storage, [num_blocks, block_size, ...] per layer).
// Block 0 is the null block: never handed out, it stands in a block table for blocks
// that no longer hold anything (sliding-window layers) and is safe to read.
// Verbs come in check/do pairs: can_allocate() then allocate().
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace tandem {

class BlockPool {
 public:
  static constexpr int32_t kNullBlock = 0;

  explicit BlockPool(int num_blocks);

  int num_blocks() const { return int(ref_counts_.size()); }
  // Blocks a sequence can ever use: all but the null block.
  int capacity() const { return num_blocks() - 1; }
  int num_free() const { return int(free_.size()); }
  int num_used() const { return capacity() - num_free(); }

  bool can_allocate(int n) const { return n <= num_free(); }
  // Takes n free blocks (ref count 1 each). Requires can_allocate(n).
  std::vector<int32_t> allocate(int n);
  // Another owner of an allocated block (shared prefixes).
  void add_ref(int32_t block);
  // Drops one reference of each block; blocks reaching zero return to the free list.
  void release(std::span<const int32_t> blocks);
  int ref_count(int32_t block) const { return ref_counts_[size_t(block)]; }

 private:
  std::vector<int32_t> ref_counts_;  // [num_blocks]
  std::deque<int32_t> free_;         // oldest-freed first
};

// Blocks needed to hold `num_tokens` tokens.
inline int blocks_for(int64_t num_tokens, int block_size) {
  return int((num_tokens + block_size - 1) / block_size);
}

}  // namespace tandem
