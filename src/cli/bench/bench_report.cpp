#include "cli/bench/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tandem::cli::bench {
namespace {

using nlohmann::json;

// A latency cell: milliseconds with one decimal, "-" when there is no value.
std::string ms_cell(const std::optional<double>& ms) {
  return ms ? fmt::format("{:.1f}", *ms) : std::string("-");
}

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json();
}

json distribution_json(const Distribution& d) {
  return {{"count", d.count},
          {"mean", optional_json(d.mean)},
          {"p50", optional_json(d.p50)},
          {"p90", optional_json(d.p90)},
          {"p99", optional_json(d.p99)}};
}

}  // namespace

std::string describe_setup(const BenchSetup& s) {
  std::string arrivals = s.request_rate
                             ? fmt::format("Poisson arrivals at {:g} req/s", *s.request_rate)
                             : std::string("closed loop");
  std::string workload;
  if (s.shared_prefix_len > 0) workload += fmt::format("  shared prefix {} tokens", s.shared_prefix_len);
  if (s.multi_turn > 0) workload += fmt::format("  {} turns per conversation", s.multi_turn);
  return fmt::format("url {}  model {}  input {} tokens  output {} tokens{}  temperature {:g}  {}{}",
                     s.url, s.model, s.input_len, s.output_len,
                     s.force_length ? "" : " (at most: EOS not ignored)", s.temperature, arrivals,
                     workload);
}

std::string table_header() {
  return fmt::format("{:>5} {:>5} {:>6} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
                     "conc", "reqs", "errors", "req/s", "out tok/s", "TTFT p50", "TTFT p90",
                     "TTFT p99", "TPOT p50", "TPOT p99", "ITL p99", "duration") +
         fmt::format("{:>5} {:>5} {:>6} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
                     "", "", "", "", "", "ms", "ms", "ms", "ms", "ms", "ms", "s");
}

std::string table_row(const RunSummary& r) {
  return fmt::format(
      "{:>5} {:>5} {:>6} {:>8.2f} {:>10.1f} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9.2f}\n",
      r.concurrency, r.num_requests, r.num_errors, r.requests_per_s, r.output_tokens_per_s,
      ms_cell(r.ttft.p50), ms_cell(r.ttft.p90), ms_cell(r.ttft.p99), ms_cell(r.tpot.p50),
      ms_cell(r.tpot.p99), ms_cell(r.itl.p99), r.duration_s);
}

std::string turn_table(const std::vector<RequestRecord>& records, int turns) {
  std::string out = fmt::format("{:>6} {:>5} {:>11} {:>11} {:>9} {:>9}\n", "turn", "reqs",
                                "prompt tok", "cached tok", "TTFT p50", "TTFT p90");
  for (int t = 0; t < turns; t++) {
    std::vector<double> ttft;
    double prompt = 0, cached = 0;
    for (const RequestRecord& r : records) {
      if (r.turn != t || !r.ok) continue;
      ttft.push_back(r.ttft_s);
      prompt += r.num_prompt_tokens;
      cached += r.cached_tokens.value_or(0);
    }
    const Distribution d = describe_ms(ttft);
    const double n = std::max<double>(1.0, double(ttft.size()));
    out += fmt::format("{:>6} {:>5} {:>11.1f} {:>11.1f} {:>9} {:>9}\n", t + 1, ttft.size(),
                       prompt / n, cached / n, ms_cell(d.p50), ms_cell(d.p90));
  }
  return out;
}

json summary_json(const RunSummary& r) {
  return {{"concurrency", r.concurrency},
          {"request_rate", optional_json(r.request_rate)},
          {"num_requests", r.num_requests},
          {"num_errors", r.num_errors},
          {"duration_s", r.duration_s},
          {"total_prompt_tokens", r.total_prompt_tokens},
          {"total_output_tokens", r.total_output_tokens},
          {"total_cached_tokens", r.total_cached_tokens},
          {"requests_per_s", r.requests_per_s},
          {"output_tokens_per_s", r.output_tokens_per_s},
          {"ttft_ms", distribution_json(r.ttft)},
          {"tpot_ms", distribution_json(r.tpot)},
          {"itl_ms", distribution_json(r.itl)},
          {"e2e_ms", distribution_json(r.e2e)}};
}

json record_json(const RequestRecord& r) {
  return {{"index", r.index},
          {"ok", r.ok},
          {"error", r.ok ? json() : json(r.error)},
          {"prompt_tokens", r.num_prompt_tokens},
          {"output_tokens", r.num_output_tokens},
          {"turn", r.turn},
          {"cached_tokens", r.cached_tokens ? json(*r.cached_tokens) : json()},
          {"start_s", r.start_s},
          {"ttft_s", r.ttft_s},
          {"e2e_s", r.e2e_s},
          {"tpot_s", optional_json(time_per_output_token(r))},
          {"arrivals_s", r.arrivals_s}};
}

json bench_json(const BenchSetup& s, const std::vector<RunSummary>& runs,
                const std::vector<std::vector<RequestRecord>>& records) {
  json setup = {{"url", s.url},
                {"model", s.model},
                {"input_len", s.input_len},
                {"output_len", s.output_len},
                {"request_rate", optional_json(s.request_rate)},
                {"temperature", s.temperature},
                {"seed", s.seed},
                {"min_tokens_and_ignore_eos", s.force_length},
                {"shared_prefix_len", s.shared_prefix_len},
                {"multi_turn", s.multi_turn}};
  json out_runs = json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    json requests = json::array();
    if (i < records.size())
      for (const RequestRecord& r : records[i]) requests.push_back(record_json(r));
    out_runs.push_back({{"summary", summary_json(runs[i])}, {"requests", std::move(requests)}});
  }
  return {{"setup", std::move(setup)}, {"runs", std::move(out_runs)}};
}

}  // namespace tandem::cli::bench
