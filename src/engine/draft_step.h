// DraftStep: one step of the draft model (speculative decoding with
// {"model": DIR, ...}, engine/speculator.h), as plain data from the engine to the executor
// (engine/executor.h: Executor::run_draft).
//
// The draft's K/V lives in the target's blocks (the same block ids; kv_layout.h sizes each
// block for both models), so rollback, preemption and the prefix cache move both at once.
// Its first forward, `first`, computes what its K/V lacks: the prompt chunks of the
// target's step (so a prompt is drafted as it is prefilled) and, for each row that
// proposes, every position up to and including its last token (a catch-up of a few tokens,
// Sequence::spec.draft_lag), sampling its first proposal there. Each next forward j
// (1 ≤ j < K) feeds every row still proposing its proposal j − 1 on the device (no host
// round trip) at the next position, and samples proposal j. So the draft's K forwards run
// all rows together, and only the K proposals of each row come back.
//
// Random streams (the Philox counters; backend/sampling.h): a row's proposal for its
// output token t is drawn with counter t | kDraftCounterBit, a stream the target never
// uses; the target's own draw for token t uses counter t (as without speculation), and
// the acceptance test of a draft-model proposal the uniform of index kAcceptIndex.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/sampling.h"
#include "engine/step_plan.h"

namespace tandem {

constexpr uint64_t kDraftCounterBit = uint64_t(1) << 63;

// A row that proposes this step.
struct DraftRow {
  int sample_index = 0;  // its row in `first`'s sampling (first.sample_index order)
  int position = 0;      // of its last known token: proposal j is for position + 1 + j
  std::vector<int32_t> block_table;  // the draft's blocks (its KV group's table)
  std::vector<SampleRow> draws;      // [K] the draft's draw of each proposal
  int num_proposals() const { return int(draws.size()); }
};

struct DraftStep {
  StepPlan first;              // in the draft's KV groups; samples rows[r] at rows[r].sample_index
  std::vector<DraftRow> rows;  // the rows that propose
  int max_proposals() const;
};

// What run_draft returns: each proposing row's K proposals, and where the draft logits each
// was drawn from sit in the draft-logits tensor the verify's sampling op reads
// (SampleRow::draft).
struct DraftProposals {
  std::vector<std::vector<int32_t>> tokens;  // [rows][K]
  std::vector<std::vector<int32_t>> q_rows;  // [rows][K]
};

// The plan of the draft's forward j (1 ≤ j < max_proposals): every row with more than j
// proposals, one token each at position + j, fed from row `feed_source[r]` of forward
// j − 1's sampling op; its groups are `num_groups` copies of the row's table.
StepPlan draft_decode_plan(std::span<const DraftRow> rows, int j, std::span<const int32_t> feed_source,
                           int num_groups, int block_size);

}  // namespace tandem
