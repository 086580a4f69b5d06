// Runs one task against a Scorer and reduces it to metrics:
//   choice      acc (argmax of log-likelihood), acc_norm (argmax of log-likelihood per
//               UTF-8 byte of the continuation)
//   generate    exact_match (normalize_for_match on both sides)
//   perplexity  nll (nats per token) and perplexity
// Items go to the scorer in batches, so a batched scorer sees many requests at once and
// progress can be reported between batches.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "eval/metrics.h"
#include "eval/scorer.h"
#include "eval/task.h"

namespace tandem::eval {

struct ChoiceOutcome {
  std::vector<Loglikelihood> options;  // [num_choices]
  size_t gold = 0, pred = 0, pred_norm = 0;
};

struct GenerateOutcome {
  std::string output;  // as generated (before normalization)
  bool correct = false;
};

struct Metric {
  std::string name;
  Estimate estimate;
};

struct TaskResult {
  const Task* task = nullptr;
  size_t num_items = 0;           // items scored; windows for perplexity
  int64_t num_tokens_scored = 0;  // perplexity only
  std::vector<Metric> metrics;
  std::variant<std::vector<ChoiceOutcome>, std::vector<GenerateOutcome>, std::vector<WindowNll>>
      outcomes;
  double seconds = 0;
};

struct EvalOptions {
  std::optional<size_t> limit;  // the first N items (windows for perplexity)
  size_t batch_items = 16;      // items per scorer call
  // Called after each batch with (items done, items in all).
  std::function<void(size_t, size_t)> progress;
};

TaskResult evaluate(const Task& task, Scorer& scorer, const EvalOptions& options);

// The parts of evaluate, for tests and other drivers.
ChoiceOutcome judge_choice(const ChoiceItem& item, std::vector<Loglikelihood> scores);
bool judge_generate(const GenerateItem& item, const std::string& output);

}  // namespace tandem::eval
