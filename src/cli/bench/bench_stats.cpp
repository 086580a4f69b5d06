#include "cli/bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::cli::bench {

std::optional<double> time_per_output_token(const RequestRecord& r) {
  if (r.num_output_tokens < 2) return std::nullopt;
  return (r.e2e_s - r.ttft_s) / double(r.num_output_tokens - 1);
}

std::vector<double> inter_token_latencies(const RequestRecord& r) {
  std::vector<double> gaps;
  for (size_t i = 1; i < r.arrivals_s.size(); ++i)
    gaps.push_back(r.arrivals_s[i] - r.arrivals_s[i - 1]);
  return gaps;
}

std::optional<double> percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(values.size() - 1);
  size_t lo = size_t(std::floor(rank));
  size_t hi = std::min(lo + 1, values.size() - 1);
  double frac = rank - double(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Distribution describe_ms(const std::vector<double>& values) {
  std::vector<double> ms(values.size());
  std::transform(values.begin(), values.end(), ms.begin(), [](double s) { return s * 1e3; });
  Distribution d;
  d.count = ms.size();
  if (!ms.empty()) d.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size());
  d.p50 = percentile(ms, 50);
  d.p90 = percentile(ms, 90);
  d.p99 = percentile(ms, 99);
  return d;
}

RunSummary summarize(const std::vector<RequestRecord>& records, int concurrency,
                     std::optional<double> request_rate, double duration_s) {
  RunSummary s;
  s.concurrency = concurrency;
  s.request_rate = request_rate;
  s.num_requests = int(records.size());
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  int num_ok = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      s.num_errors++;
      continue;
    }
    num_ok++;
    s.total_prompt_tokens += r.num_prompt_tokens;
    s.total_cached_tokens += r.cached_tokens.value_or(0);
    s.total_output_tokens += r.num_output_tokens;
    if (!r.arrivals_s.empty()) ttft.push_back(r.ttft_s);
    if (auto t = time_per_output_token(r)) tpot.push_back(*t);
    std::vector<double> gaps = inter_token_latencies(r);
    itl.insert(itl.end(), gaps.begin(), gaps.end());
    e2e.push_back(r.e2e_s);
  }
  if (duration_s > 0) {
    s.requests_per_s = double(num_ok) / duration_s;
    s.output_tokens_per_s = double(s.total_output_tokens) / duration_s;
  }
  s.ttft = describe_ms(ttft);
  s.tpot = describe_ms(tpot);
  s.itl = describe_ms(itl);
  s.e2e = describe_ms(e2e);
  return s;
}

}  // namespace tandem::cli::bench
