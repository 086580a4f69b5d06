#include "engine/step_plan.h"

#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"

namespace tandem {

StepPlan build_step_plan(std::span<const PlanRow> rows, int block_size) {
  StepPlan plan;
  plan.block_size = block_size;
  for (auto& r : rows) plan.max_blocks = std::max(plan.max_blocks, int(r.block_table.size()));
  plan.seq_starts.push_back(0);
  plan.block_table.assign(rows.size() * size_t(plan.max_blocks), BlockPool::kNullBlock);
  for (size_t b = 0; b < rows.size(); b++) {
    const PlanRow& r = rows[b];
    int end = r.start + r.count;
    TANDEM_CHECK(r.count > 0 && end <= int(r.tokens.size()), "row {}: {}+{} of {} tokens", b,
                 r.start, r.count, r.tokens.size());
    TANDEM_CHECK(blocks_for(end, block_size) <= int(r.block_table.size()),
                 "row {}: {} tokens need more than {} blocks", b, end, r.block_table.size());
    for (int p = r.start; p < end; p++) {
      plan.tokens.push_back(r.tokens[size_t(p)]);
      plan.positions.push_back(p);
      plan.slot_map.push_back(r.block_table[size_t(p / block_size)] * block_size + p % block_size);
    }
    int first_logit = int(plan.tokens.size()) - std::min(r.num_logits, r.count);
    for (int t = first_logit; t < int(plan.tokens.size()); t++) plan.sample_index.push_back(t);
    plan.seq_starts.push_back(int(plan.tokens.size()));
    plan.context_lens.push_back(end);
    std::copy(r.block_table.begin(), r.block_table.end(),
              plan.block_table.begin() + long(b) * plan.max_blocks);
  }
  return plan;
}

}  // namespace tandem
