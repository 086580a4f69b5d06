// The projections a LoRA adapter may target, recorded by the weight loader when a model is
// loaded with LoRA capacity. Each target's bank is allocated once, at load, with room for
// every slot (backend/linear.h's invariants): adapters are later written into slots and
// erased from them without moving a tensor, so CUDA graphs recorded over the banks stay
// valid, and the model's Linear shares the bank's storage.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/linear.h"

namespace tandem {

// How many adapters a loaded model can hold at once, and the largest rank of one module's
// adapter (vLLM's --max-loras and --max-lora-rank). max_loras = 0: no LoRA at all, no
// banks, nothing computed.
struct LoraCapacity {
  int max_loras = 0;
  int max_rank = 0;

  bool enabled() const { return max_loras > 0; }
  int num_slots() const { return max_loras + 1; }  // slot 0 is the base model
};

// One checkpoint weight inside a (possibly fused) projection.
struct LoraShard {
  std::string module;      // PEFT's module name: the checkpoint name less ".weight"
  int64_t row_offset = 0;  // its first output row in the fused projection
  int64_t num_rows = 0;
  // Tensor parallelism (model/tp_slices.h) splits q|k|v and gate|up by output rows: the
  // module's rows this rank holds, (first, count) ranges in order, their counts adding up
  // to num_rows; empty: all of them. full_rows: the module's own (lora_B's) rows.
  std::vector<std::pair<int64_t, int64_t>> source_rows;
  int64_t full_rows = 0;
};

struct LoraTarget {
  int layer = 0;
  std::vector<LoraShard> shards;  // in the fused projection's row order
  int64_t in_features = 0;        // K
  // Tensor parallelism splits o and down by input columns: this rank's K columns are
  // [a_first_col, a_first_col + K) of the module's full_in_features (lora_A's columns).
  int64_t a_first_col = 0;
  int64_t full_in_features = 0;
  int64_t out_features = 0;       // N = Σ shard rows
  LinearLora bank;                // a [slots, max_rank · shards, K], b [slots, N, max_rank · shards]
};

struct LoraTargets {
  LoraCapacity capacity;
  std::vector<LoraTarget> targets;
};

}  // namespace tandem
