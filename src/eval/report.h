// The end of `tandem eval`: one table row per metric (task, kind, n, metric, value,
// ± stderr, chance) and the raw numbers as JSON, per item, so that two runs (a fast path
// against its reference) can be compared item by item.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <span>
#include <string>

#include "eval/evaluate.h"

namespace tandem::eval {

// What a random guess scores on this metric: the task's chance rate, or for perplexity a
// uniform guess over `vocab_size` tokens (nll ln V, perplexity V). None when unknown.
std::optional<double> chance_of(const TaskResult& result, const Metric& metric,
                                std::optional<int> vocab_size);

std::string format_table(std::span<const TaskResult> results, std::optional<int> vocab_size);

// {"results": [{"task", "kind", "file", "n", "seconds", "metrics": {name: {"value",
// "stderr", "chance"}}, "items" | "windows": [...]}]}
nlohmann::json results_json(std::span<const TaskResult> results, std::optional<int> vocab_size);

}  // namespace tandem::eval
