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
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_groups.h"

namespace tandem {

// A sequence's block ids per group: [G][logical block]. Empty until it first grows.
using BlockTables = std::vector<std::vector<int32_t>>;

// What growing one sequence's tables takes, group by group (KvBlockManager::plan_grow).
struct GrowPlan {
  struct Group {
    int table_size = 0;  // the table's length when planned (apply() requires it unchanged)
    int num_null = 0;    // entries appended as the null block (already out of the window)
    int num_new = 0;     // blocks allocated after them
  };
  std::vector<Group> groups;  // [G]

  int num_new_blocks() const;
};

class KvBlockManager {
 public:
  // num_blocks [G]: blocks of each group's pool, the null block included.
  KvBlockManager(KvGroups groups, std::span<const int> num_blocks, int block_size);

  const KvGroups& groups() const { return groups_; }
  int num_groups() const { return groups_.num_groups(); }
  int block_size() const { return block_size_; }
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
  // Releases the window-group blocks whose every position is <= num_computed − window:
  // no query at a position >= num_computed sees them. Returns how many were released.
  int release_out_of_window(BlockTables& tables, int num_computed);
  // Releases every block of every group, each table last block first; the tables become
  // empty.
  void release(BlockTables& tables);

  // Totals over all groups (what /stats and /metrics report).
  int capacity() const;
  int num_free() const;
  int num_used() const { return capacity() - num_free(); }
  // Most tokens one sequence can hold: only the full-attention group limits it
  // (INT64_MAX when every layer slides).
  int64_t max_sequence_tokens() const;

 private:
  // First logical block a query at a position >= num_computed can read in group g.
  int first_live_block(int g, int num_computed) const;
  // Logical blocks group g's table must cover.
  int target_blocks(int g, int num_tokens, int reserve_tokens) const;

  KvGroups groups_;
  std::vector<BlockPool> pools_;  // [G]
  int block_size_;
};

}  // namespace tandem
