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

std::optional<double> SpecController::spec_cost(int num_tokens) const {
  if (std::optional<double> c = speculative_.cost(num_tokens)) return c;
  return plain_.cost(num_tokens);
}

std::vector<int> SpecController::choose(std::span<const SpecCandidate> rows, int base_rows,
                                        int base_tokens) const {
  std::vector<int> k(rows.size(), 0);
  if (!adaptive_) {
    for (size_t i = 0; i < rows.size(); i++) k[i] = rows[i].max_k;
    return k;
  }
  if (!plain_.cost(base_tokens) || speculative_run_ >= kPlainRefresh)
    return k;  // measure a plain step
  const double off_rate = base_rows / std::max(*plain_.cost(base_tokens), 1e-9);
  // Proposals in the order of their chance to be accepted: a row's next one is worth
  // α^(k+1) expected tokens.
  auto alpha = [&](size_t i) { return rows[i].acceptance.value_or(server_acceptance_); };
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry> next;
  for (size_t i = 0; i < rows.size(); i++)
    if (rows[i].max_k > 0) next.push({alpha(i), i});
  std::vector<size_t> order;
  double tokens = base_rows, best_rate = off_rate;
  size_t best_len = 0;
  std::vector<int> taken(rows.size(), 0);
  while (!next.empty()) {
    auto [gain, i] = next.top();
    next.pop();
    tokens += gain;
    order.push_back(i);
    if (++taken[i] < rows[i].max_k) next.push({gain * alpha(i), i});
    const std::optional<double> c = spec_cost(base_tokens + int(order.size()));
    const double rate = tokens / std::max(c.value_or(1e-9), 1e-9);
    if (rate > best_rate) {
      best_rate = rate;
      best_len = order.size();
    }
  }
  for (size_t j = 0; j < best_len; j++) k[order[j]]++;
  return k;
}

bool SpecController::may_speculate(std::span<const SpecCandidate> rows, int base_rows,
                                   int base_tokens) const {
  const std::vector<int> k = choose(rows, base_rows, base_tokens);
  return std::any_of(k.begin(), k.end(), [](int n) { return n > 0; });
}

void SpecController::observe_step(bool speculative, int num_tokens, double seconds) {
  (speculative ? speculative_ : plain_).observe(num_tokens, seconds);
  speculative_run_ = speculative ? speculative_run_ + 1 : 0;
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

void SpecController::observe_idle(SpecState& row) const {
  if (++row.idle_steps >= kForgetSteps) {
    row.acceptance.reset();
    row.idle_steps = 0;
  }
}

}  // namespace tandem
