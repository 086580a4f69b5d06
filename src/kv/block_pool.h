// BlockPool: the KV cache's fixed blocks, by id. It knows ids and reference counts,
// never tensors (the runner owns the storage, [num_blocks, block_size, ...] per layer).
// Block 0 is the null block: never handed out, it stands in a block table for blocks
// that no longer hold anything (sliding-window layers) and is safe to read.
//
// The free list is ordered for eviction (vLLM's FreeKVCacheBlockQueue): allocate() takes
// from its head, release() appends to its tail, so the block freed longest ago is reused
// first. It is intrusive and doubly linked, so a free block can also leave from the
// middle in O(1): add_ref() of a free block (a prefix-cache hit on a block no sequence
// holds, once blocks carry hashes) takes it back without a scan.
// Verbs come in check/do pairs: can_allocate() then allocate().
#pragma once

#include <cstdint>
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
  int num_free() const { return num_free_; }
  int num_used() const { return capacity() - num_free(); }

  bool can_allocate(int n) const { return n <= num_free(); }
  // Takes n blocks from the head of the free list (ref count 1 each), in list order.
  // Requires can_allocate(n).
  std::vector<int32_t> allocate(int n);
  // Another owner of a block (shared prefixes). A free block leaves the free list.
  void add_ref(int32_t block);
  // Drops one reference of each block, in the order given; blocks reaching zero join the
  // tail of the free list (the first of them is reused first).
  void release(std::span<const int32_t> blocks);
  int ref_count(int32_t block) const { return ref_counts_[size_t(block)]; }
  // The free blocks, head (next to be allocated) first. O(num_free); for tests and stats.
  std::vector<int32_t> free_blocks() const;

 private:
  int32_t sentinel() const { return num_blocks(); }
  void push_back(int32_t block);
  void unlink(int32_t block);
  bool valid(int32_t block) const { return block > kNullBlock && block < num_blocks(); }

  std::vector<int32_t> ref_counts_;  // [num_blocks]; a block is free iff its count is 0
  // The free list, threaded through the blocks: [num_blocks + 1], the last entry its
  // sentinel (next_[sentinel] is the head, prev_[sentinel] the tail).
  std::vector<int32_t> prev_, next_;
  int num_free_ = 0;
};

// Blocks needed to hold `num_tokens` tokens.
inline int blocks_for(int64_t num_tokens, int block_size) {
  return int((num_tokens + block_size - 1) / block_size);
}

}  // namespace tandem
