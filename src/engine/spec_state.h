// A sequence's part in speculative decoding (engine/speculator.h), kept on the engine
// thread beside its other state. Proposals are never final tokens: they live here, never
// in Sequence::tokens, and leave when the step that verifies them has been read.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/ngram_index.h"

namespace tandem {

struct SpecState {
  // The proposals this step verifies after the row's last token (K = draft.size()); the
  // scheduler gives the row K + 1 query tokens. With a draft model they are written after
  // scheduling; until then num_draft is how many the row will ask for.
  std::vector<int32_t> draft;
  int num_draft = 0;
  int num_drafted = 0;  // draft model: proposals it drew this step (before any cut)
  // The masks of the row's K + 1 verified positions, for a constrained or thinking row
  // (empty words: that position has none); the step's SampleRows point at them.
  std::vector<std::vector<uint32_t>> masks;
  // Its draft tokens drawn by the draft model (for the sampling op's q rows) at this row of
  // the draft's logits; see Speculator::verify_rows.
  std::vector<int32_t> q_rows;
  // n-gram proposer: the row's tokens indexed by n-gram (built on first use).
  std::optional<NgramIndex> ngram;
  // Draft model: positions before Sequence::num_computed whose draft K/V is not computed
  // yet (after a verify that accepted every proposal, the last one's).
  int draft_lag = 0;
  // Acceptance of this row's recent proposals (engine/spec_controller.h): the chance a
  // proposal at a reached position is accepted, and how many steps it has not speculated.
  std::optional<double> acceptance;
  int idle_steps = 0;
  // How often the row had proposals when it could have speculated (its last token read,
  // room left): an exponential moving average of 1 (it had) and 0 (the n-gram index found
  // nothing, or the grammar ruled the first out). Before a step in flight is read, the
  // controller weighs what the row may gain by it (spec_controller.h).
  std::optional<double> proposal_rate;

  // The row was preempted (its K/V is gone) or re-admitted: nothing is proposed, and the
  // draft's K/V is what the prefix cache gave it.
  void reset_kv() {
    draft.clear();
    num_draft = 0;
    draft_lag = 0;
  }
};

}  // namespace tandem
