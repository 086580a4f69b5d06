// The numbers of a load run: one record per request (when each token arrived) and the
// summary of a run (throughput, latency percentiles).
//
// Definitions (the usual serving-benchmark ones, as vLLM's benchmark_serving):
//   TTFT  time from sending the request to the first generated content
//   ITL   gap between two successive content chunks of one request (pooled over requests)
//   TPOT  (e2e − TTFT) / (n_out − 1): the mean decode time per token after the first
//   throughput  successful requests, and their output tokens, per second of run duration
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::cli::bench {

struct RequestRecord {
  int index = 0;  // position in the run's request list
  bool ok = false;
  std::string error;               // why it failed; "" when ok
  int num_prompt_tokens = 0;       // as sent
  int num_output_tokens = 0;       // usage.completion_tokens, else the content chunks
  double start_s = 0;              // when it was sent, seconds since the run started
  double ttft_s = 0;               // first content chunk, seconds since sent
  double e2e_s = 0;                // end of the stream, seconds since sent
  std::vector<double> arrivals_s;  // every content chunk, seconds since sent (ascending)
  bool constrained = false;        // sent with the run's JSON schema
  bool with_images = false;        // --image: it carried the run's images
  int turn = 0;                    // --multi-turn: the turn of its conversation (0-based)
  std::optional<int> cached_tokens;  // usage.prompt_tokens_details.cached_tokens, when sent
  std::vector<int32_t> output_ids;   // generated ids, when the server streamed them
};

// Decode time per token after the first; none for fewer than 2 output tokens.
std::optional<double> time_per_output_token(const RequestRecord& r);
// Gaps between successive content chunks of `r` (arrivals.size() − 1 of them).
std::vector<double> inter_token_latencies(const RequestRecord& r);

// The p-th percentile (p in [0, 100]) with linear interpolation between closest ranks
// (numpy's default): rank = p/100 × (n − 1). None for no values.
std::optional<double> percentile(std::vector<double> values, double p);

// Percentiles of one quantity, in milliseconds.
struct Distribution {
  size_t count = 0;
  std::optional<double> mean, p50, p90, p99;
};
// `values` in seconds → a Distribution in milliseconds.
Distribution describe_ms(const std::vector<double>& values);

struct RunSummary {
  int concurrency = 0;
  std::optional<double> request_rate;  // Poisson arrivals per second; none: closed loop
  int num_requests = 0;
  int num_errors = 0;
  double duration_s = 0;            // first send to last response
  int64_t total_prompt_tokens = 0;  // of successful requests
  int64_t total_output_tokens = 0;  // of successful requests
  double requests_per_s = 0;        // successful requests / duration
  double output_tokens_per_s = 0;
  Distribution ttft, tpot, itl, e2e;
  int64_t total_cached_tokens = 0;  // of successful requests whose usage reports them
};

RunSummary summarize(const std::vector<RequestRecord>& records, int concurrency,
                     std::optional<double> request_rate, double duration_s);

}  // namespace tandem::cli::bench
