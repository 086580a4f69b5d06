// evaluate() over a scorer whose answers the test sets, so every metric can be worked out
// by hand: which choice wins raw and per byte, batching, --limit, exact match, perplexity.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "core/error.h"
#include "eval/evaluate.h"
#include "eval/task_reader.h"

namespace tandem::eval {
namespace evaluate_test {

// Log-likelihoods by (context, continuation), outputs by prompt, windows as set; it
// records the size of every batch it is given. Anything not set is an error.
class ScriptedScorer : public Scorer {
 public:
  std::map<std::pair<std::string, std::string>, double> logprobs;
  std::map<std::string, std::string> outputs;
  std::vector<WindowNll> windows;
  std::vector<size_t> batch_sizes;
  std::optional<size_t> asked_max_windows;

  std::vector<Loglikelihood> loglikelihood(
      std::span<const LoglikelihoodRequest> requests) override {
    batch_sizes.push_back(requests.size());
    std::vector<Loglikelihood> out;
    for (const auto& r : requests) {
      auto it = logprobs.find({r.context, r.continuation});
      if (it == logprobs.end()) fail("no score for '{}' + '{}'", r.context, r.continuation);
      out.push_back({it->second, 1, false});
    }
    return out;
  }
  std::vector<std::string> generate(std::span<const GenerateRequest> requests) override {
    batch_sizes.push_back(requests.size());
    std::vector<std::string> out;
    for (const auto& r : requests) out.push_back(outputs.at(r.prompt));
    return out;
  }
  std::vector<WindowNll> rolling_nll(std::string_view, std::optional<int>,
                                     std::optional<size_t> max_windows) override {
    asked_max_windows = max_windows;
    size_t n = std::min(windows.size(), max_windows.value_or(windows.size()));
    return {windows.begin(), windows.begin() + std::ptrdiff_t(n)};
  }
};

const std::string kHeader =
    R"({"format": "tandem-eval/1", "task": "t", "kind": "choice", "chance": 0.5, "description": "d", "held_out": "h"})"
    "\n";

const Metric& metric(const TaskResult& r, const std::string& name) {
  for (const Metric& m : r.metrics)
    if (m.name == name) return m;
  throw Error("no metric " + name);
}

TEST(Evaluate, AccAndAccNormDisagreeWhenLengthsDiffer) {
  // " ab": −3 over 3 bytes = −1/byte; " abcdef": −4 over 7 bytes ≈ −0.57/byte.
  Task t = parse_task(kHeader + R"({"context": "c", "choices": [" ab", " abcdef"], "gold": 1})"
                                "\n",
                      "/tasks/t.jsonl");
  ChoiceOutcome o =
      judge_choice(std::get<ChoiceTask>(t.body).items[0], {{-3, 1, false}, {-4, 1, false}});
  EXPECT_EQ(o.pred, 0u);
  EXPECT_EQ(o.pred_norm, 1u);
  EXPECT_EQ(o.gold, 1u);
}

TEST(Evaluate, ChoiceTaskInBatchesWithProgress) {
  // Items 1–3 right by raw score; item 4 wrong raw, right per byte.
  Task t = parse_task(kHeader + R"({"context": "a", "choices": [" x", " y"], "gold": 0})"
                                "\n"
                                R"({"context": "b", "choices": [" x", " y"], "gold": 1})"
                                "\n"
                                R"({"context": "c", "choices": [" x", " y"], "gold": 1})"
                                "\n"
                                R"({"context": "d", "choices": [" x", " yyyyyyy"], "gold": 1})"
                                "\n",
                      "/tasks/t.jsonl");
  ScriptedScorer s;
  s.logprobs = {{{"a", " x"}, -1}, {{"a", " y"}, -2}, {{"b", " x"}, -3}, {{"b", " y"}, -2},
                {{"c", " x"}, -5}, {{"c", " y"}, -1}, {{"d", " x"}, -1}, {{"d", " yyyyyyy"}, -2}};
  std::vector<std::pair<size_t, size_t>> progress;
  EvalOptions o;
  o.batch_items = 3;
  o.progress = [&](size_t done, size_t total) { progress.push_back({done, total}); };
  TaskResult r = evaluate(t, s, o);
  EXPECT_EQ(r.num_items, 4u);
  EXPECT_EQ(s.batch_sizes, (std::vector<size_t>{6, 2}));  // 3 items × 2 choices, then 1 × 2
  EXPECT_EQ(progress, (std::vector<std::pair<size_t, size_t>>{{3, 4}, {4, 4}}));
  EXPECT_DOUBLE_EQ(metric(r, "acc").estimate.value, 0.75);
  EXPECT_NEAR(*metric(r, "acc").estimate.std_error, 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(metric(r, "acc_norm").estimate.value, 1.0);  // d: −1/2 < −2/8 per byte
  EXPECT_DOUBLE_EQ(*metric(r, "acc_norm").estimate.std_error, 0.0);
  const auto& items = std::get<std::vector<ChoiceOutcome>>(r.outcomes);
  EXPECT_EQ(items[3].pred, 0u);
  EXPECT_EQ(items[3].pred_norm, 1u);

  o.limit = 2;
  TaskResult first_two = evaluate(t, s, o);
  EXPECT_EQ(first_two.num_items, 2u);
  EXPECT_DOUBLE_EQ(metric(first_two, "acc").estimate.value, 1.0);
}

TEST(Evaluate, PartialScoringComparesContexts) {
  Task t =
      parse_task(kHeader + R"({"contexts": ["p:", "q:", "r:"], "continuation": " def", "gold": 2})"
                           "\n",
                 "/tasks/t.jsonl");
  ScriptedScorer s;
  s.logprobs = {{{"p:", " def"}, -9}, {{"q:", " def"}, -7}, {{"r:", " def"}, -4}};
  TaskResult r = evaluate(t, s, {});
  EXPECT_DOUBLE_EQ(metric(r, "acc").estimate.value, 1.0);
  EXPECT_DOUBLE_EQ(metric(r, "acc_norm").estimate.value, 1.0);
  EXPECT_FALSE(metric(r, "acc").estimate.std_error.has_value());  // one item
}

TEST(Evaluate, ScorerErrorsNameTheTaskFileAndLines) {
  Task t = parse_task(kHeader + R"({"context": "a", "choices": [" x", " y"], "gold": 0})"
                                "\n"
                                R"({"context": "b", "choices": [" x", " y"], "gold": 0})"
                                "\n",
                      "/tasks/t.jsonl");
  ScriptedScorer s;  // knows no scores
  try {
    evaluate(t, s, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/tasks/t.jsonl:2-3: no score for 'a' + ' x'", 0), 0u)
        << e.what();
  }
}

TEST(Evaluate, GenerateIsExactMatchAfterWhitespaceNormalization) {
  Task t = parse_task(
      R"({"format": "tandem-eval/1", "task": "g", "kind": "generate", "chance": 0, "max_tokens": 4, "description": "d", "held_out": "h"})"
      "\n"
      R"({"prompt": "p1", "expected": "earth."})"
      "\n"
      R"({"prompt": "p2", "expected": "earth."})"
      "\n"
      R"({"prompt": "p3", "expected": "the  earth"})"
      "\n",
      "/tasks/g.jsonl");
  ScriptedScorer s;
  s.outputs = {{"p1", " earth.  "}, {"p2", " Earth."}, {"p3", "the earth"}};
  TaskResult r = evaluate(t, s, {});
  const auto& items = std::get<std::vector<GenerateOutcome>>(r.outcomes);
  EXPECT_TRUE(items[0].correct);
  EXPECT_FALSE(items[1].correct);  // case counts
  EXPECT_TRUE(items[2].correct);
  EXPECT_EQ(items[0].output, " earth.  ");  // kept as generated
  EXPECT_NEAR(metric(r, "exact_match").estimate.value, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(*metric(r, "exact_match").estimate.std_error, std::sqrt((2.0 / 9.0) / 2.0), 1e-12);
}

TEST(Evaluate, PerplexityPassesTheLimitAsWindows) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "tandem_eval_evaluate";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "text.txt") << "text";
  Task t = parse_task(
      R"({"format": "tandem-eval/1", "task": "p", "kind": "perplexity", "chance": "uniform", "text": "text.txt", "description": "d", "held_out": "h"})"
      "\n",
      dir / "p.jsonl");
  ScriptedScorer s;
  s.windows = {{10, 4}, {6, 2}, {3, 2}};
  TaskResult all = evaluate(t, s, {});
  EXPECT_FALSE(s.asked_max_windows.has_value());
  EXPECT_EQ(all.num_items, 3u);
  EXPECT_EQ(all.num_tokens_scored, 8);
  EXPECT_DOUBLE_EQ(metric(all, "nll").estimate.value, 2.375);
  EXPECT_NEAR(metric(all, "perplexity").estimate.value, std::exp(2.375), 1e-12);
  EvalOptions o;
  o.limit = 2;
  TaskResult two = evaluate(t, s, o);
  EXPECT_EQ(s.asked_max_windows, 2u);
  EXPECT_DOUBLE_EQ(metric(two, "nll").estimate.value, 16.0 / 6.0);
}

}  // namespace evaluate_test
}  // namespace tandem::eval
