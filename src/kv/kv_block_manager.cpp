#include "kv/kv_block_manager.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace tandem {

KvBlockManager::KvBlockManager(KvGroups groups, std::span<const int> num_blocks, int block_size)
    : groups_(std::move(groups)), block_size_(block_size) {
  TANDEM_CHECK(int(num_blocks.size()) == groups_.num_groups() && groups_.num_groups() > 0,
               "KvBlockManager: {} block counts for {} groups", num_blocks.size(),
               groups_.num_groups());
  TANDEM_CHECK(block_size > 0, "KvBlockManager: block size {}", block_size);
  for (int n : num_blocks) pools_.emplace_back(n);
}

std::vector<int> KvBlockManager::num_blocks() const {
  std::vector<int> out;
  for (const BlockPool& p : pools_) out.push_back(p.num_blocks());
  return out;
}

int KvBlockManager::first_live_block(int g, int num_computed) const {
  const int window = groups_.groups[size_t(g)].window;
  if (window == 0) return 0;
  return std::max(0, num_computed - window + 1) / block_size_;
}

int KvBlockManager::target_blocks(int g, int num_tokens, int reserve_tokens) const {
  bool full = !groups_.groups[size_t(g)].sliding();
  return blocks_for(full ? std::max(num_tokens, reserve_tokens) : num_tokens, block_size_);
}

int GrowPlan::num_new_blocks() const {
  int n = 0;
  for (const Group& g : groups) n += g.num_new;
  return n;
}

std::optional<GrowPlan> KvBlockManager::plan_grow(const BlockTables& tables, int num_computed,
                                                  int num_tokens, int reserve_tokens) const {
  GrowPlan plan;
  for (int g = 0; g < num_groups(); g++) {
    GrowPlan::Group& p = plan.groups.emplace_back();
    p.table_size = tables.empty() ? 0 : int(tables[size_t(g)].size());
    const int target = target_blocks(g, num_tokens, reserve_tokens);
    // Entries before the first live block are appended as null blocks, not allocated.
    const int first_live = std::min(first_live_block(g, num_computed), target);
    p.num_null = std::max(0, first_live - p.table_size);
    p.num_new = std::max(0, target - std::max(p.table_size, first_live));
    if (!pools_[size_t(g)].can_allocate(p.num_new)) return std::nullopt;
  }
  return plan;
}

void KvBlockManager::apply(BlockTables& tables, const GrowPlan& plan) {
  TANDEM_CHECK(int(plan.groups.size()) == num_groups(), "KvBlockManager::apply: a plan for {} groups",
               plan.groups.size());
  if (tables.empty()) tables.resize(size_t(num_groups()));
  for (int g = 0; g < num_groups(); g++) {
    const GrowPlan::Group& p = plan.groups[size_t(g)];
    std::vector<int32_t>& table = tables[size_t(g)];
    TANDEM_CHECK(int(table.size()) == p.table_size,
                 "KvBlockManager::apply: group {} has {} blocks, the plan was made for {}", g,
                 table.size(), p.table_size);
    table.insert(table.end(), size_t(p.num_null), BlockPool::kNullBlock);
    std::vector<int32_t> fresh = pools_[size_t(g)].allocate(p.num_new);
    table.insert(table.end(), fresh.begin(), fresh.end());
  }
}

int KvBlockManager::release_out_of_window(BlockTables& tables, int num_computed) {
  int released = 0;
  for (int g = 0; g < int(tables.size()); g++) {
    if (!groups_.groups[size_t(g)].sliding()) continue;
    std::vector<int32_t>& table = tables[size_t(g)];
    // Released entries form a prefix, so walk back from the last dead block to the first
    // null one: each step costs what it releases.
    int dead = std::min(first_live_block(g, num_computed), int(table.size()));
    for (int i = dead - 1; i >= 0 && table[size_t(i)] != BlockPool::kNullBlock; i--) {
      pools_[size_t(g)].release(std::span<const int32_t>(&table[size_t(i)], 1));
      table[size_t(i)] = BlockPool::kNullBlock;
      released++;
    }
  }
  return released;
}

void KvBlockManager::release(BlockTables& tables) {
  for (size_t g = 0; g < tables.size(); g++)
    for (auto b = tables[g].rbegin(); b != tables[g].rend(); ++b)
      pools_[g].release(std::span<const int32_t>(&*b, 1));
  tables.clear();
}

int KvBlockManager::capacity() const {
  int total = 0;
  for (const BlockPool& p : pools_) total += p.capacity();
  return total;
}

int KvBlockManager::num_free() const {
  int total = 0;
  for (const BlockPool& p : pools_) total += p.num_free();
  return total;
}

int64_t KvBlockManager::max_sequence_tokens() const {
  for (int g = 0; g < num_groups(); g++)
    if (!groups_.groups[size_t(g)].sliding())
      return int64_t(pools_[size_t(g)].capacity()) * block_size_;
  return INT64_MAX;
}

}  // namespace tandem
