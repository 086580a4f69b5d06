// KvBlockManager: the block pools of every KV group (kv/kv_groups.h) and the verbs the
// scheduler applies to a sequence's block tables, one table per group. Tables are
// indexed by logical block (position / block_size) and append-only while the sequence
// runs. A full-attention group keeps every block; a sliding-window group releases the
// blocks that have left every future query's window, and their entries become the null
// block (which attention never reads: a query at p only reads keys in (p − window, p]).
// Like BlockPool it knows ids, never tensors. Growing is plan, then apply (llama.cpp's
// slot_info / apply()): plan_grow() computes what every group needs once and says
// whether the pools have it; apply() commits exactly that plan.
// A sequence's blocks are released last-first, so with the pools' LRU free lists its
// prefix (the blocks most worth reusing) stays cached longest.
//
// Prefix caching (kv/prefix_cache.h; on when constructed so): the blocks of a sequence
// that hold final tokens are named as they fill (cache_blocks), and a new sequence starts
// from the longest chain of named blocks that every group can serve (find_prefix, then
// plan_admit): a full-attention group needs every block before the hit point, a window
// group only those a query at the hit point sees. Released named blocks stay in the pools
// as cached blocks (free-list tail, LRU); blocks that can never serve a hit go to the
// free-list head and are reused first. So that a sequence's next turn finds the whole last
// window at its end, a window group then keeps one block more behind the window (the
// held window, window + block_size; kv_budget.h sizes for it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_groups.h"
#include "kv/prefix_cache.h"

namespace tandem {

// A sequence's block ids per group: [G][logical block]. Empty until it first grows.
using BlockTables = std::vector<std::vector<int32_t>>;

// What growing one sequence's tables takes, group by group (KvBlockManager::plan_grow).
struct GrowPlan {
  struct Group {
    int table_size = 0;  // the table's length when planned (apply() requires it unchanged)
    std::vector<int32_t> hit;  // a prefix hit the (empty) table starts with: null blocks, then cached ones
    int num_hit_free = 0;      // blocks of `hit` on the free list (taken from it, not allocated)
    int num_null = 0;    // entries appended as the null block (already out of the window)
    int num_new = 0;     // blocks allocated after them
  };
  std::vector<Group> groups;  // [G]

  int num_new_blocks() const;
};

// The cached blocks a new sequence can start from (KvBlockManager::find_prefix).
struct PrefixHit {
  int num_blocks = 0;  // logical blocks covered; the hit is num_blocks × block_size tokens
  BlockTables tables;  // [G][num_blocks] when num_blocks > 0: null where the group needs nothing
};

class KvBlockManager {
 public:
  // num_blocks [G]: blocks of each group's pool, the null block included.
  KvBlockManager(KvGroups groups, std::span<const int> num_blocks, int block_size,
                 bool prefix_caching = false);

  const KvGroups& groups() const { return groups_; }
  int num_groups() const { return groups_.num_groups(); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  const BlockPool& pool(int g) const { return pools_[size_t(g)]; }
  std::vector<int> num_blocks() const;  // [G], null blocks included

  // What the tables of a sequence with `num_computed` tokens cached need to cover tokens
  // [0, num_tokens): full-attention groups also cover [0, reserve_tokens) (the whole
  // prompt at admission); window groups only ever hold what a step can see. nullopt when
  // some group's pool lacks the blocks.
  std::optional<GrowPlan> plan_grow(const BlockTables& tables, int num_computed, int num_tokens,
                                    int reserve_tokens = 0) const;
  // Commits a plan made for these tables, with no allocation from the pools in between.
  void apply(BlockTables& tables, const GrowPlan& plan);
  // Releases the window-group blocks that left the held window: every position is <=
  // num_computed − held window, so no query at a position >= num_computed sees them.
  // Blocks before `num_keep_blocks` (those a hit inside the prompt can use) stay cached;
  // the later ones can serve only hits inside the generated text and are freed to the
  // free-list head. Returns how many were released.
  int release_out_of_window(BlockTables& tables, int num_computed, int num_keep_blocks = 0);
  // Releases the blocks past those that hold positions [0, num_tokens), last first, in
  // every group (speculative decoding's rollback: they held rejected proposals, never
  // final tokens, so none is named).
  void truncate(BlockTables& tables, int num_tokens);
  // Releases every block of every group, each table last block first (named blocks stay
  // cached, the others go to the free-list head); the tables become empty.
  void release(BlockTables& tables);

  // The longest prefix of at most `max_blocks` blocks of `chain` (over `tokens`) that
  // every group holds named blocks for and that ends inside none of `whole` (an image is
  // computed in one step: a hit stops before it or after it); num_blocks 0 when none (or
  // caching is off).
  PrefixHit find_prefix(const BlockHashChain& chain, std::span<const int32_t> tokens,
                        int max_blocks, std::span<const TokenRange> whole = {}) const;
  // plan_grow for an empty table starting from `hit`: the tables cover [0, num_tokens)
  // (full groups [0, reserve_tokens)), hit blocks on a free list counted as consumed.
  std::optional<GrowPlan> plan_admit(const PrefixHit& hit, int num_tokens, int reserve_tokens) const;
  // Names the blocks [begin, end) of the tables, whose tokens (of `tokens`, hashed by
  // `chain`) are final and whose K/V is computed.
  void cache_blocks(const BlockTables& tables, const BlockHashChain& chain,
                    std::span<const int32_t> tokens, int begin, int end);
  // Forgets every cached prefix (after a failed step: its K/V cannot be trusted).
  void clear_cache();

  // Totals over all groups (what /stats and /metrics report).
  int capacity() const;
  int num_free() const;
  int num_used() const { return capacity() - num_free(); }
  int num_cached() const;  // free blocks holding a named prefix (part of num_free)
  // Most tokens one sequence can hold: only the full-attention group limits it
  // (INT64_MAX when every layer slides).
  int64_t max_sequence_tokens() const;
  // Most tokens one sequence of at most `sequence_tokens` tokens can compute in one step
  // with the pools to itself: a window group must hold what it keeps behind the step (its
  // held window, or the whole sequence when that is shorter) and the step's tokens at once
  // (INT64_MAX without window groups). An image, computed in one step, must fit.
  int64_t max_step_tokens(int64_t sequence_tokens = INT64_MAX) const;

 private:
  // First logical block group g holds for a sequence at num_computed (the held window).
  int first_live_block(int g, int num_computed) const;
  // First logical block a query at the hit point (block `num_blocks`) reads in group g.
  int first_hit_block(int g, int num_blocks) const;
  // Group g's part of a plan, for a table of `table_size` blocks.
  std::optional<GrowPlan::Group> plan_group(int g, int table_size, int num_computed, int num_tokens,
                                            int reserve_tokens) const;
  // Releases one block, to the tail (kept) or, when caching, to the head.
  void release_block(int g, int32_t block, bool keep);
  // Logical blocks group g's table must cover.
  int target_blocks(int g, int num_tokens, int reserve_tokens) const;

  KvGroups groups_;
  std::vector<BlockPool> pools_;  // [G]
  int block_size_;
  bool prefix_caching_;
};

}  // namespace tandem
