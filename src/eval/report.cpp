#include "eval/report.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace tandem::eval {

namespace {

using nlohmann::json;

json optional_number(std::optional<double> v) {
  return v ? json(*v) : json(nullptr);
}

std::string number(std::optional<double> v) {
  if (!v) return "-";
  return std::abs(*v) >= 100 ? fmt::format("{:.1f}", *v) : fmt::format("{:.4f}", *v);
}

json choice_items(const Task& task, const std::vector<ChoiceOutcome>& outcomes) {
  const auto& items = std::get<ChoiceTask>(task.body).items;
  json out = json::array();
  for (size_t i = 0; i < outcomes.size(); i++) {
    json logprobs = json::array(), tokens = json::array();
    for (const Loglikelihood& l : outcomes[i].options)
      logprobs.push_back(l.logprob), tokens.push_back(l.num_tokens);
    out.push_back({{"line", items[i].line},
                   {"gold", outcomes[i].gold},
                   {"pred", outcomes[i].pred},
                   {"pred_norm", outcomes[i].pred_norm},
                   {"logprobs", logprobs},
                   {"num_tokens", tokens}});
  }
  return out;
}

json generate_items(const Task& task, const std::vector<GenerateOutcome>& outcomes) {
  const auto& items = std::get<GenerateTask>(task.body).items;
  json out = json::array();
  for (size_t i = 0; i < outcomes.size(); i++)
    out.push_back({{"line", items[i].line},
                   {"output", outcomes[i].output},
                   {"expected", items[i].expected},
                   {"correct", outcomes[i].correct}});
  return out;
}

json windows(const std::vector<WindowNll>& ws) {
  json out = json::array();
  for (const WindowNll& w : ws) out.push_back({{"nll", w.total_nll}, {"scored", w.num_scored}});
  return out;
}

}  // namespace

std::optional<double> chance_of(const TaskResult& result, const Metric& metric,
                                std::optional<int> vocab_size) {
  if (result.task->chance) return result.task->chance;
  if (!vocab_size) return std::nullopt;
  if (metric.name == "nll") return std::log(double(*vocab_size));
  if (metric.name == "perplexity") return double(*vocab_size);
  return std::nullopt;
}

std::string format_table(std::span<const TaskResult> results, std::optional<int> vocab_size) {
  size_t name_width = 4;
  for (const TaskResult& r : results) name_width = std::max(name_width, r.task->name.size());
  std::string out = fmt::format("{:<{}}  {:<10} {:>6}  {:<12} {:>9}  {:>8}  {:>8}\n", "task",
                                name_width, "kind", "n", "metric", "value", "± stderr", "chance");
  for (const TaskResult& r : results) {
    bool first = true;
    for (const Metric& m : r.metrics) {
      std::string name = first ? r.task->name : "";
      std::string kind = first ? kind_name(r.task->kind()) : "";
      std::string n = first ? fmt::format("{}", r.num_items) : "";
      out += fmt::format("{:<{}}  {:<10} {:>6}  {:<12} {:>9}  {:>8}  {:>8}\n", name, name_width,
                         kind, n, m.name, number(m.estimate.value), number(m.estimate.std_error),
                         number(chance_of(r, m, vocab_size)));
      first = false;
    }
  }
  return out;
}

json results_json(std::span<const TaskResult> results, std::optional<int> vocab_size) {
  json list = json::array();
  for (const TaskResult& r : results) {
    json metrics = json::object();
    for (const Metric& m : r.metrics)
      metrics[m.name] = {{"value", m.estimate.value},
                         {"stderr", optional_number(m.estimate.std_error)},
                         {"chance", optional_number(chance_of(r, m, vocab_size))}};
    json t = {{"task", r.task->name},          {"kind", kind_name(r.task->kind())},
              {"file", r.task->file.string()}, {"n", r.num_items},
              {"seconds", r.seconds},          {"metrics", metrics}};
    if (auto* c = std::get_if<std::vector<ChoiceOutcome>>(&r.outcomes))
      t["items"] = choice_items(*r.task, *c);
    if (auto* g = std::get_if<std::vector<GenerateOutcome>>(&r.outcomes))
      t["items"] = generate_items(*r.task, *g);
    if (auto* w = std::get_if<std::vector<WindowNll>>(&r.outcomes)) {
      t["windows"] = windows(*w);
      t["tokens_scored"] = r.num_tokens_scored;
    }
    list.push_back(std::move(t));
  }
  return {{"results", list}};
}

}  // namespace tandem::eval
