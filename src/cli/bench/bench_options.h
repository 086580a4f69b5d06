// `tandem bench`: a load generator for any OpenAI-compatible server (tandem, vLLM, ...).
// It streams /v1/completions requests with random token-id prompts at each concurrency
// of a sweep and reports throughput and latency percentiles (TTFT, TPOT, ITL). Two
// workloads exercise a prefix cache: --shared-prefix-len (every prompt starts with the
// same tokens) and --multi-turn (conversations that resend their history each turn).
// --image WxH sends chat completions with synthetic images instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::cli {

struct BenchOptions {
  std::string url = "http://127.0.0.1:8080";  // the server root; a trailing /v1 is accepted
  std::string model;                          // "": the first id of GET /v1/models
  // --models a,b,...: request i names models[i % n] (LoRA adapters spread evenly); overrides
  // --model.
  std::vector<std::string> models;
  std::vector<int> concurrency = {1};         // one measured run per value (a sweep)
  int num_requests = 0;                       // per run; 0: max(4 × concurrency, 16)
  int input_len = 128;                        // prompt tokens per request
  int output_len = 128;                       // generated tokens per request (EOS ignored)
  std::optional<double> request_rate;         // requests/s, Poisson arrivals; none: closed loop
  int shared_prefix_len = 0;  // tokens every prompt (a conversation's first) starts with
  // Turns per conversation (0: single requests). Turn t + 1 resends turn t's prompt and
  // reply plus input_len new tokens; --num-requests then counts conversations.
  int multi_turn = 0;
  float temperature = 0.f;
  int token_min = 100;       // prompt ids are uniform in [token_min, token_max)
  int token_max = 500;       // below 512, so even the tiny test models accept them
  std::optional<int> vocab;  // caps token_max at the model's vocabulary size
  uint64_t seed = 0;         // prompts and arrival times are a function of the seed
  std::optional<std::string> api_key;
  int timeout_s = 600;    // read timeout of one request
  std::string json_path;  // --json FILE: raw per-request numbers and summaries
  std::string plot_path;  // --plot FILE.svg: throughput and TTFT against concurrency
  // --json-schema FILE: constrained requests carry it as response_format json_schema;
  // --constrained-fraction F of the requests are constrained (spread evenly).
  std::string json_schema_path;
  double constrained_fraction = 1.0;
  // --endpoint: "completions" (streamed generation), or "embeddings" (/v1/embeddings,
  // embeddings_bench.h), where each request carries embed_batch inputs of input_len tokens
  // and asks for vectors in embed_encoding ("float" or "base64").
  std::string endpoint = "completions";
  int embed_batch = 1;
  std::string embed_encoding = "float";
  // --image WxH: chat requests carrying synthetic PNGs of that size (image_workload.h),
  // --images-per-request of them, on --image-fraction of the requests; --same-image sends
  // one image everywhere (for cache hits) instead of a fresh one per request.
  std::string image;
  int images_per_request = 1;
  double image_fraction = 1.0;
  bool same_image = false;
};

int run_bench(const BenchOptions& options);

}  // namespace tandem::cli
