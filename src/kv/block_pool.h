// BlockPool: the KV cache's fixed blocks, by id. It knows ids, reference counts and the
// prefix-cache names of blocks (kv/prefix_cache.h), never tensors (the runner owns the
// storage, [num_blocks, block_size, ...] per layer). Block 0 is the null block: never
// handed out, it stands in a block table for blocks that no longer hold anything
// (sliding-window layers) and is safe to read.
//
// The free list is ordered for eviction (vLLM's FreeKVCacheBlockQueue): allocate() takes
// from its head; release() appends to its tail, so the block freed longest ago is reused
// first; release_first() puts blocks at its head, for blocks that can never serve a hit
// (reused before any cached one). It is intrusive and doubly linked, so a free block can
// also leave from the middle in O(1): add_ref() of a free block (a prefix-cache hit on a
// block no sequence holds) takes it back without a scan.
//
// Cached blocks: a block holding a full block of final tokens may be named by its key
// (cache()). A named block keeps its name while free — an unreferenced cached block,
// evictable — and loses it only when allocate() hands it out again (eviction) or
// release_first() frees it. lookup() finds a named block by key, held or free.
// Verbs come in check/do pairs: can_allocate() then allocate().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/prefix_cache.h"

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
  // Free blocks that still hold a named prefix (evictable, and reusable by a hit).
  int num_cached() const { return num_cached_; }
  // Cached blocks handed out again by allocate() so far.
  int64_t num_evictions() const { return num_evictions_; }

  bool can_allocate(int n) const { return n <= num_free(); }
  // Takes n blocks from the head of the free list (ref count 1 each), in list order,
  // evicting the names of cached ones. Requires can_allocate(n).
  std::vector<int32_t> allocate(int n);
  // Another owner of a block (a shared prefix). A free block leaves the free list.
  void add_ref(int32_t block);
  // Drops one reference of each block, in the order given; blocks reaching zero join the
  // tail of the free list (the first of them is reused first), names kept.
  void release(std::span<const int32_t> blocks);
  // The same, but blocks reaching zero lose their names and go to the head of the free
  // list (the last of them is reused first).
  void release_first(std::span<const int32_t> blocks);
  int ref_count(int32_t block) const { return ref_counts_[size_t(block)]; }
  // The free blocks, head (next to be allocated) first. O(num_free); for tests and stats.
  std::vector<int32_t> free_blocks() const;

  // Names a held block. False (and the block stays unnamed) when the key's hash already
  // names a block, or this block already has a name.
  bool cache(int32_t block, const BlockKey& key);
  // The block named by `key`, its parent hash and tokens verified.
  std::optional<int32_t> lookup(const BlockKey& key) const;
  bool named(int32_t block) const { return names_[size_t(block)].has_value(); }
  // Forgets every name (after a failed step, whose K/V cannot be trusted).
  void clear_names();

 private:
  struct Name {
    BlockHash hash = 0;
    BlockHash parent = 0;
    std::vector<int32_t> tokens;
  };
  int32_t sentinel() const { return num_blocks(); }
  void link_after(int32_t at, int32_t block);
  void unlink(int32_t block);
  void forget(int32_t block);
  bool valid(int32_t block) const { return block > kNullBlock && block < num_blocks(); }

  std::vector<int32_t> ref_counts_;  // [num_blocks]; a block is free iff its count is 0
  // The free list, threaded through the blocks: [num_blocks + 1], the last entry its
  // sentinel (next_[sentinel] is the head, prev_[sentinel] the tail).
  std::vector<int32_t> prev_, next_;
  int num_free_ = 0;
  std::vector<std::optional<Name>> names_;         // [num_blocks]
  std::unordered_map<BlockHash, int32_t> by_hash_;  // every named block, held or free
  int num_cached_ = 0;                              // free and named
  int64_t num_evictions_ = 0;
};

// Blocks needed to hold `num_tokens` tokens.
inline int blocks_for(int64_t num_tokens, int block_size) {
  return int((num_tokens + block_size - 1) / block_size);
}

}  // namespace tandem
