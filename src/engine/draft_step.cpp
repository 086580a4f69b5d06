#include "engine/draft_step.h"

#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"

namespace tandem {

int DraftStep::max_proposals() const {
  int k = 0;
  for (const DraftRow& r : rows) k = std::max(k, r.num_proposals());
  return k;
}

StepPlan draft_decode_plan(std::span<const DraftRow> rows, int j, std::span<const int32_t> feed_source,
                           int num_groups, int block_size) {
  StepPlan plan;
  plan.block_size = block_size;
  plan.seq_starts.push_back(0);
  KvGroupPlan group;
  for (const DraftRow& r : rows) group.max_blocks = std::max(group.max_blocks, int(r.block_table.size()));
  size_t f = 0;
  for (const DraftRow& r : rows) {
    if (r.num_proposals() <= j) continue;
    const int p = r.position + j;
    TANDEM_CHECK(blocks_for(p + 1, block_size) <= int(r.block_table.size()),
                 "draft position {} needs more than the row's {} blocks", p, r.block_table.size());
    const int32_t block = r.block_table[size_t(p / block_size)];
    TANDEM_CHECK(block != BlockPool::kNullBlock, "draft position {} would be written to the null block", p);
    TANDEM_CHECK(f < feed_source.size(), "draft forward {}: {} rows fed from {}", j, f + 1, feed_source.size());
    plan.feed_index.push_back(int32_t(plan.tokens.size()));
    plan.feed_source.push_back(feed_source[f++]);
    plan.sample_index.push_back(int32_t(plan.tokens.size()));
    plan.tokens.push_back(0);
    plan.positions.push_back(p);
    plan.seq_starts.push_back(int32_t(plan.tokens.size()));
    plan.context_lens.push_back(p + 1);
    group.slot_map.push_back(block * block_size + p % block_size);
    group.block_table.insert(group.block_table.end(), r.block_table.begin(), r.block_table.end());
    group.block_table.resize(plan.context_lens.size() * size_t(group.max_blocks), BlockPool::kNullBlock);
  }
  TANDEM_CHECK(f == feed_source.size(), "draft forward {}: {} rows fed from {}", j, f, feed_source.size());
  plan.groups.assign(size_t(num_groups), group);
  return plan;
}

}  // namespace tandem
