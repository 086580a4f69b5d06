// `tandem bench --endpoint embeddings`: embedding throughput of any OpenAI-compatible
// server. Each request sends --embed-batch random token-id inputs of --input-len tokens to
// /v1/embeddings (closed loop or --request-rate arrivals, each concurrency of the sweep
// in turn); a request counts as ok when the answer is 200 and holds one vector per input.
// Reported per run: requests/s, inputs/s, prompt tokens/s (usage.prompt_tokens, else the
// ids sent) and the request latency's mean and percentiles.
#pragma once

#include <string>
#include <vector>

#include "cli/bench/bench_options.h"
#include "cli/bench/bench_stats.h"
#include "cli/bench/load_gen.h"

namespace tandem::cli::bench {

// {"model", "input": [[ids], ...], "encoding_format"}
std::string embeddings_body(const std::string& model,
                            const std::vector<std::vector<int32_t>>& inputs,
                            const std::string& encoding_format);

// Sends one request; `run_start_s` is the zero of the record's start_s. The record's
// num_prompt_tokens is usage.prompt_tokens (or the ids sent), num_output_tokens the vectors
// received.
RequestRecord send_embeddings(const Endpoint& endpoint, const std::string& model,
                              const std::vector<std::vector<int32_t>>& inputs,
                              const std::string& encoding_format, double run_start_s);

// Per run: concurrency, requests, errors, req/s, inputs/s, prompt tok/s, latency.
std::string embeddings_table_header();
std::string embeddings_table_row(const RunSummary& run, int inputs_per_request);

// The whole sweep (run_bench's embeddings branch); the exit code.
int run_embeddings_bench(const BenchOptions& o, const Endpoint& endpoint, const std::string& model,
                         int token_max);

}  // namespace tandem::cli::bench
