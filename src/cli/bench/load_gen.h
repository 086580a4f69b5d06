// The load generator: streaming /v1/completions requests from `concurrency` workers,
// closed-loop (each worker sends its next request as soon as the last one finished) or
// on a Poisson schedule (a request waits for its arrival time and for a free worker, so
// at most `concurrency` are in flight). Each request opens its own connection (with
// TCP_NODELAY), so TTFT includes the connect, as for a fresh client. Failures are records,
// never exceptions: a run always finishes and counts its errors.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench/bench_stats.h"
#include "cli/bench/image_workload.h"

namespace tandem::cli::bench {

// Where the server is, from "http://host:port[/prefix][/v1][/]".
struct Endpoint {
  std::string origin;                  // "http://host:port" (httplib::Client's scheme_host_port)
  std::string prefix;                  // path before /v1: "" or e.g. "/proxy"
  std::optional<std::string> api_key;  // sent as "Authorization: Bearer KEY"
  int timeout_s = 600;                 // read timeout (a long generation is silent for a while)
};
// Throws tandem::Error for a URL that is not http(s)://host[:port][/path].
Endpoint parse_endpoint(const std::string& url);

// The body fields every request of a run shares.
struct RequestShape {
  std::string model;
  std::vector<std::string> models;  // non-empty: request i names models[i % size] instead
  // The shape of request i (its model).
  RequestShape for_request(int i) const;
  int max_tokens = 128;
  float temperature = 0.f;
  bool force_length = true;  // also send min_tokens = max_tokens and ignore_eos (vLLM's)
  std::string schema_text;   // "": no constrained requests; else the JSON Schema they carry
  double constrained_fraction = 1.0;
  // Whether request i is constrained: floor(i·F) steps up at i, so F of them, spread evenly.
  bool constrained(int i) const;
  bool return_token_ids = false;  // ask for the generated ids (vLLM's and tandem's field)
  // --image: chat requests with synthetic images instead of token-id completions.
  ImageWorkload images;
};

// {"model", "prompt": [ids], "max_tokens", ["min_tokens", "ignore_eos"], "temperature",
//  "stream": true, "stream_options": {"include_usage": true}, ["response_format"]}; with
// shape.images on, a chat body instead: "messages" with request `index`'s images and the
// prompt as words (image_workload.h) in place of "prompt".
std::string completion_body(const RequestShape& shape, const std::vector<int32_t>& prompt,
                            bool constrained = false, int index = 0);
// "/v1/chat/completions" with images on, else "/v1/completions".
const char* request_path(const RequestShape& shape);

// A plain (not streamed) POST of a JSON body to {prefix}{path}, read whole.
struct HttpAnswer {
  std::string error;  // the transport's failure ("could not connect ..."); "" when answered
  int status = 0;
  std::string body;
};
HttpAnswer post_json(const Endpoint& endpoint, const std::string& path, const std::string& body);

// GET {prefix}/v1/models → the first model id. Throws tandem::Error naming the URL and
// the reason when the server is unreachable or lists no model.
std::string discover_model(const Endpoint& endpoint);

// Sends one streaming completion; `run_start` is the zero of the record's start_s. A
// request is ok when the server answered 200, streamed no error and ended with [DONE].
RequestRecord send_completion(const Endpoint& endpoint, const RequestShape& shape,
                              const std::vector<int32_t>& prompt, double run_start_s,
                              bool constrained = false, int index = 0);

struct LoadPlan {
  int concurrency = 1;
  std::vector<std::vector<int32_t>> prompts;  // one request each, sent in this order
  std::vector<double> send_at_s;  // per request, seconds after the start; empty: closed loop
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in plan order
  double duration_s = 0;               // start to the end of the last request
};

// Called after each finished request, from the worker threads (one at a time).
using ProgressFn = std::function<void(int num_done, int num_total, int num_errors)>;

LoadResult run_load(const Endpoint& endpoint, const RequestShape& shape, const LoadPlan& plan,
                    const ProgressFn& progress = {});

// Runs job(0..num_jobs) on `concurrency` threads; each job returns its records (sent with
// `start`, the run's zero, as run_start_s), which land at [job × per_job, …) with their
// index set. Progress counts records. run_load and run_conversations are such runs.
using JobFn = std::function<std::vector<RequestRecord>(int job, double start)>;
LoadResult run_jobs(int num_jobs, int per_job, int concurrency, const ProgressFn& progress,
                    const JobFn& job);

// --multi-turn: a conversation's turns go one after another. Turn t + 1 sends turn t's
// prompt, its reply — the generated ids when the server streams them (return_token_ids),
// else `fallback_replies[t]` — and `user_turns[t]`.
struct Conversation {
  std::vector<int32_t> first_prompt;
  std::vector<std::vector<int32_t>> user_turns;        // [turns − 1]
  std::vector<std::vector<int32_t>> fallback_replies;  // [turns − 1]
  int num_turns() const { return int(user_turns.size()) + 1; }
};

struct ConversationPlan {
  int concurrency = 1;  // conversations in flight
  std::vector<Conversation> conversations;
};

// Records conversation-major (conversation i's turn t at i × turns + t), each with its turn.
// A failed turn ends its conversation: its later turns are recorded as not sent.
LoadResult run_conversations(const Endpoint& endpoint, const RequestShape& shape,
                             const ConversationPlan& plan, const ProgressFn& progress = {});

// Seconds on a steady clock (the time base of run_start_s).
double steady_seconds();

}  // namespace tandem::cli::bench
