#include "engine/spec_controller.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

namespace tandem {

double expected_accepted(double acceptance, int k) {
  double sum = 0, term = 1;
  for (int i = 0; i < k; i++) sum += (term *= acceptance);
  return sum;
}

std::optional<double> SpecController::cost(StepKind kind, int num_tokens) const {
  switch (kind) {
    case StepKind::Overlapped:
      return overlapped_.cost(num_tokens);
    case StepKind::Synchronous:
      return synchronous_.cost(num_tokens);
    case StepKind::Speculative:
      return speculative_.cost(num_tokens);
  }
  return std::nullopt;
}

SpecController::SpecCostLine SpecController::spec_cost_line(bool extrapolate) const {
  SpecCostLine line;
  if (!extrapolate) return line;
  line.top = speculative_.largest();
  if (!line.top) return line;
  // The slope from the largest plain step below it (what its extra tokens cost).
  std::optional<StepCostModel::Point> base = synchronous_.largest_below(line.top->tokens);
  if (!base) base = overlapped_.largest_below(line.top->tokens);
  if (base)
    line.slope =
        std::max(0.0, (line.top->seconds - base->seconds) / (line.top->tokens - base->tokens));
  return line;
}

std::optional<double> SpecController::spec_cost(int num_tokens, const SpecCostLine& line) const {
  if (line.top && num_tokens > line.top->tokens)
    return line.top->seconds + line.slope * (num_tokens - line.top->tokens);
  if (std::optional<double> c = speculative_.cost(num_tokens)) return c;
  if (std::optional<double> c = synchronous_.cost(num_tokens)) return c;
  return overlapped_.cost(num_tokens);
}

std::vector<int> SpecController::pick(std::span<const SpecCandidate> rows, int base_rows,
                                      int base_tokens, double plain_seconds,
                                      bool extrapolate, double* best_rate_out) const {
  std::vector<int> k(rows.size(), 0);
  const double off_rate = base_rows / std::max(plain_seconds, 1e-9);
  // Proposals in the order of their chance to be accepted: a row's next one is worth
  // α^(k+1) expected tokens when it has it, and it has it with chance p (so it adds p
  // query tokens and p·α^(k+1) expected tokens; the order per query token stays α's).
  auto alpha = [&](size_t i) { return rows[i].acceptance.value_or(server_acceptance_); };
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry> next;
  for (size_t i = 0; i < rows.size(); i++)
    if (rows[i].max_k > 0 && rows[i].proposal_rate > 0) next.push({alpha(i), i});
  std::vector<size_t> order;
  double tokens = base_rows, proposals = 0, best_rate = off_rate;
  size_t best_len = 0;
  std::vector<int> taken(rows.size(), 0);
  // The step's size only grows along the queue: its cost is looked up once per size.
  const SpecCostLine line = spec_cost_line(extrapolate);
  int costed_tokens = -1;
  std::optional<double> c;
  while (!next.empty()) {
    auto [gain, i] = next.top();
    next.pop();
    const double p = std::min(rows[i].proposal_rate, 1.0);
    tokens += p * gain;
    proposals += p;
    order.push_back(i);
    if (++taken[i] < rows[i].max_k) next.push({gain * alpha(i), i});
    const int step_tokens = base_tokens + int(std::lround(proposals));
    if (step_tokens != costed_tokens) {
      c = spec_cost(step_tokens, line);
      costed_tokens = step_tokens;
    }
    const double rate = tokens / std::max(c.value_or(1e-9), 1e-9);
    if (rate > best_rate) {
      best_rate = rate;
      best_len = order.size();
    }
  }
  for (size_t j = 0; j < best_len; j++) k[order[j]]++;
  if (best_rate_out) *best_rate_out = best_rate;
  return k;
}

std::vector<int> SpecController::choose(std::span<const SpecCandidate> rows, int base_rows,
                                        int base_tokens, bool overlapped) const {
  if (!adaptive_) {
    std::vector<int> k(rows.size(), 0);
    for (size_t i = 0; i < rows.size(); i++) k[i] = rows[i].max_k;
    return k;
  }
  const std::optional<double> plain = (overlapped ? overlapped_ : synchronous_).cost(base_tokens);
  if (!plain || speculative_run_ >= kPlainRefresh)
    return std::vector<int>(rows.size(), 0);  // measure a plain step
  return pick(rows, base_rows, base_tokens, *plain);
}

bool SpecController::may_speculate(std::span<const SpecCandidate> rows, int base_rows,
                                   int base_tokens) {
  const auto any = [](const std::vector<int>& k) {
    return std::any_of(k.begin(), k.end(), [](int n) { return n > 0; });
  };
  if (!adaptive_) return any(choose(rows, base_rows, base_tokens));
  // No row with room: nothing to gain, nothing to learn (and no probe counted).
  if (std::none_of(rows.begin(), rows.end(), [](const SpecCandidate& r) { return r.max_k > 0; }))
    return false;
  if (since_overlapped_ >= kPlainRefresh) {  // an overlapped step measures that cost again
    since_overlapped_ = 0;
    return false;
  }
  const std::optional<double> plain = overlapped_.cost(base_tokens);
  const std::optional<double> sync = synchronous_.cost(base_tokens);
  // An overlapped step measured dearer than a synchronous one is stale (see above): no
  // read, so the next step measures it again.
  const bool stale = plain && sync && *plain > *sync;
  const int bucket = StepCostModel::bucket_of(base_tokens);
  double rate = 0;
  if (plain && !stale && speculative_run_ < kPlainRefresh &&
      any(pick(rows, base_rows, base_tokens, *plain, /*extrapolate=*/true, &rate))) {
    // What the read gives as the reads so far went (the read yield, see above).
    const double y = read_yield(base_tokens);
    const double sync_rate = base_rows / std::max(sync.value_or(*plain), 1e-9);
    if (y * rate + (1 - y) * sync_rate > base_rows / std::max(*plain, 1e-9)) {
      declines_ = 0;
      probe_interval_ = kProbeInterval;
      read_pending_ = bucket;
      return true;
    }
  }
  if (!plain || ++declines_ < probe_interval_) return false;
  declines_ = 0;  // a probe (see above); the next one waits longer unless a read pays first
  probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  read_pending_ = bucket;
  return true;
}

void SpecController::observe_read(bool speculated) {
  if (read_pending_ < 0) return;
  double& waste = read_waste_[size_t(read_pending_)];
  waste += kReadWeight * ((speculated ? 0.0 : 1.0) - waste);
  read_pending_ = -1;
}

void SpecController::observe_step(StepKind kind, int num_tokens, double seconds) {
  (kind == StepKind::Overlapped    ? overlapped_
   : kind == StepKind::Synchronous ? synchronous_
                                   : speculative_)
      .observe(num_tokens, seconds);
  speculative_run_ = kind == StepKind::Speculative ? speculative_run_ + 1 : 0;
  since_overlapped_ = kind == StepKind::Overlapped ? 0 : since_overlapped_ + 1;
}

void SpecController::observe_row(SpecState& row, int proposed, int accepted) {
  row.idle_steps = 0;
  // Positions reached: the accepted ones and the first rejected one (if any).
  const int reached = std::min(proposed, accepted + 1);
  for (int i = 0; i < reached; i++) {
    const double hit = i < accepted ? 1.0 : 0.0;
    double& a = row.acceptance.emplace(row.acceptance.value_or(server_acceptance_));
    a += kRowWeight * (hit - a);
    server_acceptance_ += kServerWeight * (hit - server_acceptance_);
  }
}

void SpecController::observe_proposals(SpecState& row, bool had) {
  const double x = had ? 1.0 : 0.0;
  double& p = row.proposal_rate.emplace(row.proposal_rate.value_or(server_proposal_rate_));
  p += kRowWeight * (x - p);
  server_proposal_rate_ += kServerWeight * (x - server_proposal_rate_);
}

void SpecController::observe_idle(SpecState& row) const {
  if (++row.idle_steps >= kForgetSteps) {
    row.acceptance.reset();
    row.idle_steps = 0;
  }
}

}  // namespace tandem
