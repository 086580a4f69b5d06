// How bench results are shown: the table on stdout (one row per concurrency) and the
// --json document (the setup, per run its summary and every request's raw numbers).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/bench/bench_stats.h"

namespace tandem::cli::bench {

// The facts shared by every run of a sweep.
struct BenchSetup {
  std::string url;
  std::string model;
  int input_len = 0;
  int output_len = 0;
  std::optional<double> request_rate;  // none: closed loop
  float temperature = 0.f;
  uint64_t seed = 0;
  bool force_length = true;  // min_tokens/ignore_eos were sent
  int shared_prefix_len = 0;
  int multi_turn = 0;        // turns per conversation; 0: single requests
};

// "url ..., model ..., input 128, output 128 tokens, closed loop" (one line, no newline).
std::string describe_setup(const BenchSetup& setup);
// Column names, then one row per run; each line ends with '\n'.
std::string table_header();
std::string table_row(const RunSummary& run);
// --multi-turn: per turn, the requests, mean prompt and cached tokens, and TTFT p50/p90.
std::string turn_table(const std::vector<RequestRecord>& records, int turns);

nlohmann::json summary_json(const RunSummary& run);
nlohmann::json record_json(const RequestRecord& record);
// {"setup": {...}, "runs": [{"summary": {...}, "requests": [...]}, ...]}
nlohmann::json bench_json(const BenchSetup& setup, const std::vector<RunSummary>& runs,
                          const std::vector<std::vector<RequestRecord>>& records);

}  // namespace tandem::cli::bench
