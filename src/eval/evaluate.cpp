#include "eval/evaluate.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace tandem::eval {

namespace {

size_t num_to_run(size_t num_items, const EvalOptions& o) {
  return o.limit ? std::min(*o.limit, num_items) : num_items;
}

void report(const EvalOptions& o, size_t done, size_t total) {
  if (o.progress) o.progress(done, total);
}

// Runs items [0, n) in batches of o.batch_items through `run_batch(first, last)`; an error
// names the task file and the lines of the batch it came from.
template <typename Items, typename RunBatch>
void in_batches(const Task& task, const Items& items, size_t n, const EvalOptions& o,
                RunBatch run_batch) {
  size_t step = std::max<size_t>(o.batch_items, 1);
  for (size_t first = 0; first < n; first += step) {
    size_t last = std::min(n, first + step);
    try {
      run_batch(first, last);
    } catch (const Error& e) {
      fail("{}:{}-{}: {}", task.file.string(), items[first].line, items[last - 1].line, e.what());
    }
    report(o, last, n);
  }
}

std::vector<double> column(size_t n, const std::function<double(size_t)>& value) {
  std::vector<double> xs(n);
  for (size_t i = 0; i < n; i++) xs[i] = value(i);
  return xs;
}

void run_choice(const ChoiceTask& t, Scorer& scorer, const EvalOptions& o, TaskResult& r) {
  const Task& task = *r.task;
  size_t n = num_to_run(t.items.size(), o);
  std::vector<ChoiceOutcome> outcomes;
  in_batches(task, t.items, n, o, [&](size_t first, size_t last) {
    std::vector<LoglikelihoodRequest> requests;
    for (size_t i = first; i < last; i++)
      requests.insert(requests.end(), t.items[i].options.begin(), t.items[i].options.end());
    std::vector<Loglikelihood> scores = scorer.loglikelihood(requests);
    TANDEM_CHECK(scores.size() == requests.size(), "the scorer answered {} of {} requests",
                 scores.size(), requests.size());
    auto next = scores.begin();
    for (size_t i = first; i < last; i++) {
      auto end = next + std::ptrdiff_t(t.items[i].options.size());
      outcomes.push_back(judge_choice(t.items[i], std::vector<Loglikelihood>(next, end)));
      next = end;
    }
  });
  auto acc = column(n, [&](size_t i) { return double(outcomes[i].pred == outcomes[i].gold); });
  auto acc_norm =
      column(n, [&](size_t i) { return double(outcomes[i].pred_norm == outcomes[i].gold); });
  r.metrics = {{"acc", mean_with_stderr(acc)}, {"acc_norm", mean_with_stderr(acc_norm)}};
  r.num_items = n;
  r.outcomes = std::move(outcomes);
}

void run_generate(const GenerateTask& t, Scorer& scorer, const EvalOptions& o, TaskResult& r) {
  const Task& task = *r.task;
  size_t n = num_to_run(t.items.size(), o);
  std::vector<GenerateOutcome> outcomes;
  in_batches(task, t.items, n, o, [&](size_t first, size_t last) {
    std::vector<GenerateRequest> requests;
    for (size_t i = first; i < last; i++)
      requests.push_back({t.items[i].prompt, t.items[i].stop, t.max_tokens});
    std::vector<std::string> outputs = scorer.generate(requests);
    TANDEM_CHECK(outputs.size() == requests.size(), "the scorer answered {} of {} prompts",
                 outputs.size(), requests.size());
    for (size_t i = first; i < last; i++)
      outcomes.push_back({outputs[i - first], judge_generate(t.items[i], outputs[i - first])});
  });
  auto em = column(n, [&](size_t i) { return double(outcomes[i].correct); });
  r.metrics = {{"exact_match", mean_with_stderr(em)}};
  r.num_items = n;
  r.outcomes = std::move(outcomes);
}

void run_perplexity(const PerplexityTask& t, Scorer& scorer, const EvalOptions& o, TaskResult& r) {
  std::ifstream in(t.text_file, std::ios::binary);
  if (!in) fail("{}: cannot open the perplexity text", t.text_file.string());
  std::stringstream text;
  text << in.rdbuf();
  std::vector<WindowNll> windows;
  try {
    windows = scorer.rolling_nll(text.str(), t.window, o.limit);
  } catch (const Error& e) {
    fail("{}: {}: {}", r.task->file.string(), t.text_file.string(), e.what());
  }
  report(o, windows.size(), windows.size());
  Estimate nll = mean_nll_over_windows(windows);
  r.metrics = {{"nll", nll}, {"perplexity", perplexity_of(nll)}};
  r.num_items = windows.size();
  for (const WindowNll& w : windows) r.num_tokens_scored += w.num_scored;
  r.outcomes = std::move(windows);
}

}  // namespace

ChoiceOutcome judge_choice(const ChoiceItem& item, std::vector<Loglikelihood> scores) {
  TANDEM_CHECK(scores.size() == item.options.size(), "{} scores for {} choices", scores.size(),
               item.options.size());
  std::vector<double> raw, per_byte;
  for (size_t i = 0; i < scores.size(); i++) {
    raw.push_back(scores[i].logprob);
    per_byte.push_back(scores[i].logprob / double(item.options[i].continuation.size()));
  }
  return {std::move(scores), item.gold, argmax_first(raw), argmax_first(per_byte)};
}

bool judge_generate(const GenerateItem& item, const std::string& output) {
  return normalize_for_match(output) == normalize_for_match(item.expected);
}

TaskResult evaluate(const Task& task, Scorer& scorer, const EvalOptions& options) {
  auto start = std::chrono::steady_clock::now();
  TaskResult r;
  r.task = &task;
  if (auto* c = std::get_if<ChoiceTask>(&task.body))
    run_choice(*c, scorer, options, r);
  else if (auto* g = std::get_if<GenerateTask>(&task.body))
    run_generate(*g, scorer, options, r);
  else
    run_perplexity(std::get<PerplexityTask>(task.body), scorer, options, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tandem::eval
