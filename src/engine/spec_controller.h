// SpecController: how many proposals each row verifies this step, and whether the step
// speculates at all (docs/DESIGN.md §10: from measured step costs, not a constant).
//
// The model: a row whose proposals are each accepted with chance α (given the ones before
// were) emits, verifying k of them, 1 + E(α, k) tokens, E(α, k) = α + α² + ... + α^k. A
// step of N query tokens costs C(N), measured as steps run (step_cost_model.h): plain steps
// and speculative ones apart, since a speculative step also pays for its proposals, its
// masks and (on an overlapped device) the wait for its tokens. Adding proposals one at a
// time where they are likeliest accepted (the largest α_r^(k_r+1) first), the step
// speculates with the prefix that gives the most expected tokens per second — when that
// beats the plain step's rows / C_plain(N). So at a batch where verifying costs more than
// it yields, no row speculates; at batch 1, where a forward of 5 tokens costs about one of
// 1, most rows do.
//
// Both costs must be known where they are compared: the first step a controller plans is a
// plain one, and after kPlainRefresh speculative steps in a row one plain step measures
// again what not speculating costs now (a regime where speculation pays loses one step's
// gain). A cost bucket counts from its second step (step_cost_model.h), so the first verify
// step of a size, which may warm the device up, does not keep speculation off by itself.
//
// α_r is the row's own, an exponential moving average over its verified positions; a row
// starts from the server's (the same average over every row), and returns to it after
// kForgetSteps steps without speculating (what it proposes now may be unlike before).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "engine/spec_state.h"
#include "engine/step_cost_model.h"

namespace tandem {

struct SpecCandidate {
  int max_k = 0;                     // proposals the row has (or may ask the draft for)
  std::optional<double> acceptance;  // its α, when it has verified proposals before
};

class SpecController {
 public:
  static constexpr double kRowWeight = 0.25;    // of a verified position in the row's α
  static constexpr double kServerWeight = 0.02; // ... in the server's
  static constexpr int kForgetSteps = 32;
  static constexpr int kPlainRefresh = 64;

  // `adaptive` false: every row verifies all it has (max_k), every step.
  explicit SpecController(bool adaptive) : adaptive_(adaptive) {}

  // Proposals for each candidate row this step (0: none); `base_rows` rows emit a token
  // whether or not any speculates, in a step of `base_tokens` query tokens.
  std::vector<int> choose(std::span<const SpecCandidate> rows, int base_rows, int base_tokens) const;
  // Whether some row would speculate if each had `max_k` proposals: before proposing,
  // the engine reads the step in flight only when this holds (engine.h's overlap rule).
  bool may_speculate(std::span<const SpecCandidate> rows, int base_rows, int base_tokens) const;

  // A step ran: `num_tokens` query tokens in `seconds`, speculative or not.
  void observe_step(bool speculative, int num_tokens, double seconds);
  // A row verified `proposed` proposals and `accepted` of them were (its positions after
  // the first rejection were not reached).
  void observe_row(SpecState& row, int proposed, int accepted);
  // A row could have speculated this step and did not.
  void observe_idle(SpecState& row) const;

  double server_acceptance() const { return server_acceptance_; }

 private:
  // The cost of a speculative step of n tokens: measured, else a plain step's.
  std::optional<double> spec_cost(int num_tokens) const;

  bool adaptive_;
  int speculative_run_ = 0;  // speculative steps since the last plain one
  double server_acceptance_ = 0.5;
  StepCostModel plain_;
  StepCostModel speculative_;
};

// E(α, k): expected accepted proposals among k, each accepted with chance α once reached.
double expected_accepted(double acceptance, int k);

}  // namespace tandem
