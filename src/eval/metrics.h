// The numbers a task reports and their standard errors, as lm-evaluation-harness computes
// them where it has them: a mean over items with the sample standard deviation (n − 1)
// over √n. Perplexity's tokens are not independent, so its standard error is taken over
// windows instead (mean_nll_over_windows).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "eval/scorer.h"

namespace tandem::eval {

struct Estimate {
  double value = 0;
  std::optional<double> std_error;  // none with fewer than two items
};

// mean(xs) ± sample_stddev(xs) / √n. For 0/1 scores this is √(p(1 − p) / (n − 1)).
Estimate mean_with_stderr(std::span<const double> xs);

// Σ nll / Σ scored over the windows; the standard error is the linearized (ratio
// estimator) one with windows as clusters:
//   m = ΣS_w / ΣN_w,  se² = W / (W − 1) · Σ (S_w − m·N_w)² / (ΣN_w)².
Estimate mean_nll_over_windows(std::span<const WindowNll> windows);

// exp(nll), with the delta-method standard error exp(nll) · se(nll).
Estimate perplexity_of(const Estimate& mean_nll);

// The index of the largest value, the first one on ties (numpy's argmax).
size_t argmax_first(std::span<const double> values);

// What exact match compares: leading and trailing whitespace removed and every inner run
// of whitespace (space, tab, newline, CR) made one space. Case and punctuation count.
std::string normalize_for_match(std::string_view text);

}  // namespace tandem::eval
