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
// Three kinds of step are timed apart (StepKind), since their costs differ for the same
// tokens: a plain step planned while the step before it ran (overlapped: the host's work
// hidden behind the device's), a plain step planned with nothing in flight (synchronous:
// the host plans while the device idles) and a speculative step (also synchronous — its
// rows' proposals follow their last tokens — and paying for its proposals and masks).
// choose() runs once proposals are known: a step in flight has been read (or none was), so
// the plain step it weighs against is a synchronous one (an overlapped one when a step is
// still in flight). may_speculate() runs before: reading the step in flight early costs the
// overlap, so it weighs what the rows may gain against an overlapped plain step — and a
// row gains only when it has proposals, which it has with its proposal rate p_r (an average
// like α_r, over the steps it could speculate), so the expected tokens and the proposals of
// a row count p_r times. At 64 rows whose n-gram index rarely finds anything the step is
// not read early and keeps its overlap; at batch 1, or for a row that proposes often and
// is accepted, it is.
//
// A step larger than any speculative step measured is costed as the largest one by choose
// (optimistic: tried once, then known), but by may_speculate along the line through the
// largest plain step below it and the largest speculative one (what each extra token cost
// there): choose sees the proposals the rows have, may_speculate only expects them, and at
// 256 rows expecting half of them to propose a flat cost would make a step of 768 query
// tokens look as cheap as one of 376 — reading early step after step for a choose that,
// seeing the real proposals and the measured cost, then declines.
//
// Whether an early read pays is also learned from what the reads gave: an early read
// lets choose see the rows' real proposals, and when it then speculates nothing the step
// lost its overlap for nothing. The share of early reads whose step speculated (the read
// yield y, an average per batch size: the buckets of step_cost_model.h) weighs the
// expectation: reading early gives y · (the speculative step's expected rate) + (1 − y) ·
// (a synchronous plain step's rate), and must beat the overlapped plain step's rate. At 256
// rows with n-gram proposals on text that rarely repeats, reads led to a speculative step
// 5 times in 644 (an H100, 2026-12-07) and cost 3% of throughput: y falls within a few
// reads and the step keeps its overlap (probes still read now and then, and move y); at
// batch 1 on text that repeats, nearly every read speculates and y stays near 1.
//
// The yield stops the reads only while a synchronous plain step costs more than an
// overlapped one: were it cheaper, (1 − y) · its rate alone would beat the overlapped rate
// and the reads would go on whatever y. It never is (it pays the host's planning on the
// device's time), but the overlapped cost is measured only by overlapped steps, which the
// reads make rare (one in kPlainRefresh), so one dear overlapped step (a decode graph
// captured mid-run, charged until such steps were excluded; any hiccup) holds it up for
// hundreds of steps: at 256 rows on an H100, 521 of about 750 steps were read early for 5
// that speculated (a simulation of that sequence reproduces it). So an overlapped cost
// above the synchronous one at that size is taken as stale: may_speculate says no (a
// decline, so probes still read and measure the synchronous cost too) and the next step
// measures the overlapped cost again.
//
// Both costs must be known where they are compared: until the plain step a decision weighs
// against is measured, nothing speculates (a plain step measures it). After kPlainRefresh
// speculative steps in a row one plain step measures again what not speculating costs now,
// and after kPlainRefresh steps with none overlapped may_speculate says no once, so the
// overlapped cost is measured again too (a regime where speculation pays loses those
// steps' gain). When may_speculate has declined kProbeInterval times in a row it says yes
// once: the rows' proposal rates are only seen when the step is read, and may have
// changed; probes that change nothing back off (the interval doubles, up to
// kMaxProbeInterval, until a step is read early for its own sake). A cost bucket counts from its
// second step (step_cost_model.h), so the first verify step of a size, which may warm the device
// up, does not keep speculation off by itself.
//
// α_r and p_r are the row's own; a row starts from the server's (the same averages over
// every row); α_r returns to the server's after kForgetSteps steps without speculating
// (what it proposes now may be unlike before).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/spec_state.h"
#include "engine/step_cost_model.h"

namespace tandem {

struct SpecCandidate {
  int max_k = 0;                     // proposals the row has (or may ask the draft for)
  std::optional<double> acceptance;  // its α, when it has verified proposals before
  double proposal_rate = 1.0;        // the chance it has them (1: it has)
};

// What a step was, for the cost model it is charged to (see above).
enum class StepKind : uint8_t {
  Overlapped,   // plain, planned while the step before it was in flight
  Synchronous,  // plain, planned with no step in flight
  Speculative,  // some row verified proposals
};

class SpecController {
 public:
  static constexpr double kRowWeight = 0.25;     // of a verified position in the row's α
  static constexpr double kServerWeight = 0.02;  // ... in the server's
  static constexpr int kForgetSteps = 32;
  static constexpr int kPlainRefresh = 64;
  static constexpr int kProbeInterval = 32;
  static constexpr int kMaxProbeInterval = 256;
  static constexpr double kReadWeight = 0.2;  // of an early read's outcome in its yield

  // `adaptive` false: every row verifies all it has (max_k), every step.
  explicit SpecController(bool adaptive) : adaptive_(adaptive) {}

  // Proposals for each candidate row this step (0: none); `base_rows` rows emit a token
  // whether or not any speculates, in a step of `base_tokens` query tokens. `overlapped`:
  // a step is still in flight, so a plain step now would overlap it.
  std::vector<int> choose(std::span<const SpecCandidate> rows, int base_rows, int base_tokens,
                          bool overlapped = false) const;
  // Whether reading the step in flight early pays: some row would speculate if each had
  // `max_k` proposals with its proposal rate, against an overlapped plain step (the engine
  // reads the step in flight before proposing only when this holds; engine.h). Counts its
  // answers for the refresh and the probe above.
  bool may_speculate(std::span<const SpecCandidate> rows, int base_rows, int base_tokens);

  // The step planned after the last early read (may_speculate's yes) speculated or not:
  // the read yield above. Without a read awaiting its outcome, nothing.
  void observe_read(bool speculated);
  // The read yield of steps of `base_tokens` rows (1 until a read there is seen).
  double read_yield(int base_tokens) const {
    return 1 - read_waste_[size_t(StepCostModel::bucket_of(base_tokens))];
  }

  // A step ran: `num_tokens` query tokens in `seconds`.
  void observe_step(StepKind kind, int num_tokens, double seconds);
  // A row verified `proposed` proposals and `accepted` of them were (its positions after
  // the first rejection were not reached).
  void observe_row(SpecState& row, int proposed, int accepted);
  // A row could have speculated this step and did not.
  void observe_idle(SpecState& row) const;
  // A row could have speculated this step: whether it had proposals.
  void observe_proposals(SpecState& row, bool had);

  double server_acceptance() const { return server_acceptance_; }
  double proposal_rate(const SpecState& row) const {
    return row.proposal_rate.value_or(server_proposal_rate_);
  }
  // The measured cost of a step of `num_tokens` of this kind.
  std::optional<double> cost(StepKind kind, int num_tokens) const;

 private:
  // The cost of a speculative step of n tokens: measured, else a synchronous plain step's,
  // else an overlapped one's. With `extrapolate`, past the largest speculative step
  // measured (line.top) its cost grows along the line from the largest plain step below it
  // (not held flat); the line is found once per pick, which asks for every size it tries.
  struct SpecCostLine {
    std::optional<StepCostModel::Point> top;  // none: no extrapolation
    double slope = 0;                         // seconds per token past top
  };
  SpecCostLine spec_cost_line(bool extrapolate) const;
  std::optional<double> spec_cost(int num_tokens, const SpecCostLine& line) const;
  // The greedy choice above against plain steps costing `plain_seconds`.
  // `best_rate`, when given: the expected tokens a second of the choice.
  std::vector<int> pick(std::span<const SpecCandidate> rows, int base_rows, int base_tokens,
                        double plain_seconds, bool extrapolate = false,
                        double* best_rate = nullptr) const;

  bool adaptive_;
  int speculative_run_ = 0;   // speculative steps since the last plain one
  int since_overlapped_ = 0;  // steps since an overlapped one (or the last refresh)
  int declines_ = 0;          // may_speculate's noes in a row
  int probe_interval_ = kProbeInterval;  // the noes after which it probes
  int read_pending_ = -1;     // the bucket of an early read awaiting its outcome
  // 1 − the read yield per bucket (zero-initialised: a yield of 1 until a read is seen)
  std::array<double, StepCostModel::kBuckets> read_waste_{};
  double server_acceptance_ = 0.5;
  double server_proposal_rate_ = 0.5;
  StepCostModel overlapped_;
  StepCostModel synchronous_;
  StepCostModel speculative_;
};

// E(α, k): expected accepted proposals among k, each accepted with chance α once reached.
double expected_accepted(double acceptance, int k);

}  // namespace tandem
