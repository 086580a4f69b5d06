// Speculator: the engine's side of speculative decoding (docs/DESIGN.md §10,
// docs/speculative-decoding.md). Each step, before the scheduler runs, it gives every row
// that may speculate a number of proposals K (spec_controller.h) and, with the n-gram
// method, the proposals themselves (ngram_index.h); a draft model writes them after
// scheduling (draft_step.h). The scheduler gives such a row K + 1 query tokens; the step
// samples all K + 1 positions (verify_rows); the row emits its accepted proposals and the
// target's own token after them (accept), and the engine rolls its K/V back to what was
// accepted.
//
// Exactness. Position i of a verifying row is sampled as the row's next token would be
// without speculation, had proposals 0..i−1 been emitted: the same mask (its grammar and
// thinking advanced along the proposals), the same penalties (counted over them), the same
// logprobs, and the same Philox counter (tokens generated so far + i). So:
// - greedy: the target's argmax at each position; proposals are accepted while they equal
//   it, and the first that does not is replaced by it — the longest agreeing prefix plus
//   the target's next token, token for token what the row emits without speculation;
// - sampled, one-hot q (n-gram): the target's own draw x_i at position i; the proposal is
//   accepted when x_i equals it, else x_i is emitted. That is the min(1, p/q) rule for
//   q = one-hot(d): d is accepted with probability p(d), and on rejection x_i is
//   distributed as p restricted to tokens ≠ d, renormalized — the residual
//   max(0, p − q) / Σ. It emits exactly the tokens the row emits without speculation.
// - sampled, draft model: the sampling op accepts d with probability min(1, p(d)/q(d))
//   (uniform from the counter's index kAcceptIndex) and otherwise draws from
//   max(0, p − q) normalized (backend/sampling.h) — the output distribution is the
//   target's, and a seeded request is reproducible run to run.
// In every case a proposal is accepted exactly when the emitted token equals it, so the
// host reads acceptance off the tokens.
//
// Proposals are cut where they cannot be emitted: at one the row's mask rules out (a
// grammar, a thinking budget's forced tokens), after one that ends the row (EOS, a stop
// token, a grammar's end), and at max_tokens and the context length.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/draft_step.h"
#include "engine/engine_api.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/spec_controller.h"
#include "engine/speculative_config.h"

namespace tandem {

// What the speculator needs of the model and the KV layout.
struct SpeculatorSetup {
  int vocab_size = 0;
  int max_model_len = 0;
  std::vector<int32_t> eos_token_ids;
  int block_size = 16;
  // Draft model: the target's KV group whose block tables the draft's K/V uses, and the
  // draft's own number of KV groups.
  int draft_table_group = 0;
  int draft_num_groups = 0;
};

class Speculator {
 public:
  Speculator(SpeculativeConfig config, SpeculatorSetup setup);

  const SpeculativeConfig& config() const { return config_; }
  bool uses_draft_model() const { return config_.method == SpecMethod::DraftModel; }

  // Whether reading the step in flight early pays (SpecController::may_speculate, each
  // running row with its proposal rate): the engine then reads it before proposing (a
  // row's proposals follow its last token; engine.h). A yes counts a step read early.
  bool may_speculate(std::span<Sequence* const> running);
  // Before scheduling: each running row's K this step (Sequence::spec.num_draft) and, for
  // n-gram, its proposals; 0 for rows that do not speculate. `overlapped`: a step is still
  // in flight (a plain step now would overlap it).
  void propose(std::span<Sequence* const> running, bool overlapped);
  // After scheduling: what the scheduler left of each row's proposals (the token budget
  // or the KV blocks may have cut them).
  void take_schedule(std::span<const ScheduledRow> rows);
  // Draft model, after scheduling: the draft's step for the scheduled rows (their prompt
  // chunks and the proposing rows).
  DraftStep draft_step(std::span<const ScheduledRow> rows);
  // Draft model: the proposals run_draft made, cut where they cannot be emitted; a row cut
  // short computes fewer tokens this step (rows[i].num_tokens).
  void take_proposals(std::span<ScheduledRow> rows, const DraftProposals& proposals);

  // The K + 1 sampling rows of a row verifying K proposals, appended to `out`.
  void verify_rows(const Sequence& seq, std::vector<SampleRow>& out) const;
  // The row's step was read: how many of its proposals were accepted (picked has its
  // K + 1 tokens; the row emits picked[0..accepted]). Updates its acceptance, the
  // counters and its draft K/V lag.
  int accept(Sequence& seq, std::span<const SampledToken> picked);
  // A step ran in `seconds` with `num_tokens` query tokens (its cost is charged only
  // where it says what a decode or verify step costs: the engine counts speculative steps
  // with count_step).
  void observe_step(StepKind kind, int num_tokens, double seconds) {
    controller_.observe_step(kind, num_tokens, seconds);
  }
  void count_step(bool speculative) {
    if (speculative) stats_.num_speculative_steps++;
  }

  SpecDecodeStats stats() const { return stats_; }
  const SpecController& controller() const { return controller_; }

 private:
  // How many proposals the row may verify now (0: it may not speculate).
  int room(const Sequence& seq) const;
  bool eligible(const Sequence& seq, bool ignore_in_flight) const;
  // The row's n-gram index, made on first use.
  NgramIndex& ngram_of(SpecState& s) const;
  // How many of `draft` the row could emit, with the masks of positions 0..that many.
  int usable(const Sequence& seq, std::span<const int32_t> draft,
             std::vector<std::vector<uint32_t>>& masks) const;
  // The draft model's draw of proposal j of a row.
  SampleRow draft_draw(const Sequence& seq, int j) const;

  SpeculativeConfig config_;
  SpeculatorSetup setup_;
  SpecController controller_;
  SpecDecodeStats stats_;
};

}  // namespace tandem
