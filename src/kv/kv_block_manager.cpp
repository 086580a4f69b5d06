#include "kv/kv_block_manager.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace tandem {

KvBlockManager::KvBlockManager(KvGroups groups, std::span<const int> num_blocks, int block_size,
                               bool prefix_caching)
    : groups_(std::move(groups)), block_size_(block_size), prefix_caching_(prefix_caching) {
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
  const int held = window + (prefix_caching_ ? block_size_ : 0);
  return std::max(0, num_computed - held + 1) / block_size_;
}

int KvBlockManager::first_hit_block(int g, int num_blocks) const {
  const int window = groups_.groups[size_t(g)].window;
  if (window == 0) return 0;
  return std::max(0, num_blocks * block_size_ - window + 1) / block_size_;
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

std::optional<GrowPlan::Group> KvBlockManager::plan_group(int g, int table_size, int num_computed,
                                                          int num_tokens, int reserve_tokens) const {
  GrowPlan::Group p;
  p.table_size = table_size;
  const int target = target_blocks(g, num_tokens, reserve_tokens);
  // Entries before the first live block are appended as null blocks, not allocated.
  const int first_live = std::min(first_live_block(g, num_computed), target);
  p.num_null = std::max(0, first_live - table_size);
  p.num_new = std::max(0, target - std::max(table_size, first_live));
  if (!pools_[size_t(g)].can_allocate(p.num_new)) return std::nullopt;
  return p;
}

std::optional<GrowPlan> KvBlockManager::plan_grow(const BlockTables& tables, int num_computed,
                                                  int num_tokens, int reserve_tokens) const {
  GrowPlan plan;
  for (int g = 0; g < num_groups(); g++) {
    const int size = tables.empty() ? 0 : int(tables[size_t(g)].size());
    std::optional<GrowPlan::Group> p = plan_group(g, size, num_computed, num_tokens, reserve_tokens);
    if (!p) return std::nullopt;
    plan.groups.push_back(std::move(*p));
  }
  return plan;
}

std::optional<GrowPlan> KvBlockManager::plan_admit(const PrefixHit& hit, int num_tokens,
                                                   int reserve_tokens) const {
  if (hit.num_blocks == 0) return plan_grow({}, 0, num_tokens, reserve_tokens);
  GrowPlan plan;
  for (int g = 0; g < num_groups(); g++) {
    const BlockPool& pool = pools_[size_t(g)];
    // The table starts as the hit (which already has every null entry a query at the hit
    // point may skip); the rest is new.
    GrowPlan::Group& p = plan.groups.emplace_back();
    p.hit = hit.tables[size_t(g)];
    p.num_new = std::max(0, target_blocks(g, num_tokens, reserve_tokens) - hit.num_blocks);
    for (int32_t b : p.hit)
      if (b != BlockPool::kNullBlock && pool.ref_count(b) == 0) p.num_hit_free++;
    if (!pool.can_allocate(p.num_new + p.num_hit_free)) return std::nullopt;
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
    // Hit blocks leave the free list before anything is allocated, so no allocation
    // evicts a block this plan reuses.
    for (int32_t b : p.hit)
      if (b != BlockPool::kNullBlock) pools_[size_t(g)].add_ref(b);
    table.insert(table.end(), p.hit.begin(), p.hit.end());
    table.insert(table.end(), size_t(p.num_null), BlockPool::kNullBlock);
    std::vector<int32_t> fresh = pools_[size_t(g)].allocate(p.num_new);
    table.insert(table.end(), fresh.begin(), fresh.end());
  }
}

void KvBlockManager::release_block(int g, int32_t block, bool keep) {
  const std::span<const int32_t> one(&block, 1);
  if (!prefix_caching_ || (keep && pools_[size_t(g)].named(block))) pools_[size_t(g)].release(one);
  else pools_[size_t(g)].release_first(one);
}

int KvBlockManager::release_out_of_window(BlockTables& tables, int num_computed, int num_keep_blocks) {
  int released = 0;
  for (int g = 0; g < int(tables.size()); g++) {
    if (!groups_.groups[size_t(g)].sliding()) continue;
    std::vector<int32_t>& table = tables[size_t(g)];
    // Released entries form a prefix, so walk back from the last dead block to the first
    // null one: each step costs what it releases.
    int dead = std::min(first_live_block(g, num_computed), int(table.size()));
    for (int i = dead - 1; i >= 0 && table[size_t(i)] != BlockPool::kNullBlock; i--) {
      release_block(g, table[size_t(i)], i < num_keep_blocks);
      table[size_t(i)] = BlockPool::kNullBlock;
      released++;
    }
  }
  return released;
}

void KvBlockManager::truncate(BlockTables& tables, int num_tokens) {
  const size_t keep = size_t(blocks_for(num_tokens, block_size_));
  for (size_t g = 0; g < tables.size(); g++) {
    std::vector<int32_t>& table = tables[g];
    for (size_t i = table.size(); i > keep; i--)
      if (table[i - 1] != BlockPool::kNullBlock) release_block(int(g), table[i - 1], /*keep=*/false);
    if (table.size() > keep) table.resize(keep);
  }
}

void KvBlockManager::release(BlockTables& tables) {
  for (size_t g = 0; g < tables.size(); g++)
    for (auto b = tables[g].rbegin(); b != tables[g].rend(); ++b)
      if (*b != BlockPool::kNullBlock) release_block(int(g), *b, /*keep=*/true);
  tables.clear();
}

PrefixHit KvBlockManager::find_prefix(const BlockHashChain& chain, std::span<const int32_t> tokens,
                                      int max_blocks, std::span<const TokenRange> whole) const {
  PrefixHit hit;
  int max_k = std::min(max_blocks, chain.size());
  if (!prefix_caching_ || max_k <= 0) return hit;
  // found[g][i]: group g's named block for logical block i. A full group serves a hit of
  // k blocks iff it holds all of [0, k), so it bounds k; a window group iff it holds the
  // blocks a query at the hit point sees, [first_hit_block(k), k).
  const size_t G = size_t(num_groups());
  std::vector<std::vector<std::optional<int32_t>>> found(G);
  for (int g = 0; g < num_groups(); g++) {
    if (groups_.groups[size_t(g)].sliding()) continue;
    for (int i = 0; i < max_k; i++) {
      std::optional<int32_t> b = pools_[size_t(g)].lookup(chain.key(i, tokens, block_size_));
      if (!b) {
        max_k = i;
        break;
      }
      found[size_t(g)].push_back(b);
    }
  }
  // run[g][i]: named blocks of window group g ending at logical block i, contiguous.
  std::vector<std::vector<int>> run(G);
  for (int g = 0; g < num_groups(); g++) {
    if (!groups_.groups[size_t(g)].sliding()) continue;
    for (int i = 0; i < max_k; i++) {
      found[size_t(g)].push_back(pools_[size_t(g)].lookup(chain.key(i, tokens, block_size_)));
      run[size_t(g)].push_back(found[size_t(g)][size_t(i)] ? (i ? run[size_t(g)][size_t(i) - 1] : 0) + 1 : 0);
    }
  }
  auto splits = [&](int k) {
    const int at = k * block_size_;
    return std::any_of(whole.begin(), whole.end(),
                       [&](const TokenRange& r) { return r.begin < at && at < r.end; });
  };
  for (int k = max_k; k > 0; k--) {
    if (splits(k)) continue;
    bool served = true;
    for (int g = 0; g < num_groups() && served; g++)
      if (groups_.groups[size_t(g)].sliding())
        served = run[size_t(g)][size_t(k) - 1] >= k - first_hit_block(g, k);
    if (!served) continue;
    hit.num_blocks = k;
    for (int g = 0; g < num_groups(); g++) {
      std::vector<int32_t>& table = hit.tables.emplace_back(size_t(k), BlockPool::kNullBlock);
      for (int i = first_hit_block(g, k); i < k; i++) table[size_t(i)] = *found[size_t(g)][size_t(i)];
    }
    return hit;
  }
  return hit;
}

void KvBlockManager::cache_blocks(const BlockTables& tables, const BlockHashChain& chain,
                                  std::span<const int32_t> tokens, int begin, int end) {
  if (!prefix_caching_) return;
  for (size_t g = 0; g < tables.size(); g++)
    for (int i = begin; i < std::min(end, int(tables[g].size())); i++)
      if (tables[g][size_t(i)] != BlockPool::kNullBlock)
        pools_[g].cache(tables[g][size_t(i)], chain.key(i, tokens, block_size_));
}

void KvBlockManager::clear_cache() {
  for (BlockPool& p : pools_) p.clear_names();
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

int KvBlockManager::num_cached() const {
  int total = 0;
  for (const BlockPool& p : pools_) total += p.num_cached();
  return total;
}

int64_t KvBlockManager::max_step_tokens(int64_t sequence_tokens) const {
  int64_t most = INT64_MAX;
  for (int g = 0; g < num_groups(); g++) {
    const int window = groups_.groups[size_t(g)].window;
    if (window == 0) continue;
    const int64_t capacity = pools_[size_t(g)].capacity();  // the null block aside
    // A sequence no longer than what the pool holds whole never waits on its window: every
    // step of it fits.
    if (sequence_tokens <= capacity * block_size_) continue;
    // A step from c holds blocks [first_live_block(c), ⌈(c + n) / bs⌉): at most the held
    // window's blocks, one partial block, then n's.
    const int held = window + (prefix_caching_ ? block_size_ : 0);
    const int64_t behind = (held + block_size_ - 2) / block_size_ + 1;
    const int64_t usable = capacity - behind;
    most = std::min(most, std::max<int64_t>(0, usable) * block_size_);
  }
  return most;
}

int64_t KvBlockManager::max_sequence_tokens() const {
  for (int g = 0; g < num_groups(); g++)
    if (!groups_.groups[size_t(g)].sliding())
      return int64_t(pools_[size_t(g)].capacity()) * block_size_;
  return INT64_MAX;
}

}  // namespace tandem
