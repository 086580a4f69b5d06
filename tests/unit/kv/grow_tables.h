// Tests grow block tables in one call: plan_grow, then apply (throws when the pools lack
// the blocks, as a scheduler that skipped the check would have to).
#pragma once

#include "core/error.h"
#include "kv/kv_block_manager.h"

namespace tandem::test {

inline void grow(KvBlockManager& kv, BlockTables& tables, int num_computed, int num_tokens,
                 int reserve_tokens = 0) {
  std::optional<GrowPlan> plan = kv.plan_grow(tables, num_computed, num_tokens, reserve_tokens);
  if (!plan) fail("no blocks to grow to {} tokens", num_tokens);
  kv.apply(tables, *plan);
}

}  // namespace tandem::test
