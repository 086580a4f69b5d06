#include "eval/metrics.h"

#include <cmath>

#include "core/error.h"

namespace tandem::eval {

Estimate mean_with_stderr(std::span<const double> xs) {
  TANDEM_CHECK(!xs.empty(), "a mean over no items");
  double sum = 0;
  for (double x : xs) sum += x;
  Estimate e{sum / double(xs.size()), std::nullopt};
  if (xs.size() < 2) return e;
  double squares = 0;
  for (double x : xs) squares += (x - e.value) * (x - e.value);
  double sample_stddev = std::sqrt(squares / double(xs.size() - 1));
  e.std_error = sample_stddev / std::sqrt(double(xs.size()));
  return e;
}

Estimate mean_nll_over_windows(std::span<const WindowNll> windows) {
  double total = 0, scored = 0;
  for (const WindowNll& w : windows) total += w.total_nll, scored += double(w.num_scored);
  TANDEM_CHECK(scored > 0, "a perplexity over no scored tokens");
  Estimate e{total / scored, std::nullopt};
  if (windows.size() < 2) return e;
  double residuals = 0;
  for (const WindowNll& w : windows) {
    double r = w.total_nll - e.value * double(w.num_scored);
    residuals += r * r;
  }
  double num_windows = double(windows.size());
  e.std_error = std::sqrt(num_windows / (num_windows - 1) * residuals) / scored;
  return e;
}

Estimate perplexity_of(const Estimate& mean_nll) {
  Estimate e{std::exp(mean_nll.value), std::nullopt};
  if (mean_nll.std_error) e.std_error = e.value * *mean_nll.std_error;
  return e;
}

size_t argmax_first(std::span<const double> values) {
  TANDEM_CHECK(!values.empty(), "argmax of nothing");
  size_t best = 0;
  for (size_t i = 1; i < values.size(); i++)
    if (values[i] > values[best]) best = i;
  return best;
}

std::string normalize_for_match(std::string_view text) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::string out;
  bool pending_space = false;
  for (char c : text) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

}  // namespace tandem::eval
