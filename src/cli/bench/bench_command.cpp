// `tandem bench`: a sweep over concurrencies against one OpenAI-compatible server. Table
// rows go to stdout as each run finishes; progress and warnings go to stderr.
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "cli/bench/bench_options.h"
#include "cli/bench/bench_report.h"
#include "cli/bench/embeddings_bench.h"
#include "cli/bench/load_gen.h"
#include "cli/bench/svg_plot.h"
#include "cli/bench/workload.h"
#include "core/error.h"

namespace tandem::cli {
namespace {

using namespace bench;

// Default requests per run: enough for p90 to mean something, and every worker busy
// several times over.
int requests_for(const BenchOptions& o, int concurrency) {
  return o.num_requests > 0 ? o.num_requests : std::max(4 * concurrency, 16);
}

void validate(const BenchOptions& o, int token_max) {
  if (o.concurrency.empty()) fail("--concurrency: give at least one value");
  for (int c : o.concurrency)
    if (c < 1) fail("--concurrency: {} is not a positive count", c);
  if (o.num_requests < 0) fail("--num-requests must be >= 0 (got {})", o.num_requests);
  if (o.input_len < 1) fail("--input-len must be >= 1 (got {})", o.input_len);
  if (o.output_len < 1) fail("--output-len must be >= 1 (got {})", o.output_len);
  if (o.request_rate && !(*o.request_rate > 0))
    fail("--request-rate must be > 0 (got {})", *o.request_rate);
  if (o.vocab && *o.vocab < 1) fail("--vocab must be >= 1 (got {})", *o.vocab);
  if (o.token_min < 0 || o.token_min >= token_max)
    fail("the prompt token range [{}, {}) is empty (--token-min, --token-max, --vocab)",
         o.token_min, token_max);
  if (o.timeout_s < 1) fail("--timeout must be >= 1 s (got {})", o.timeout_s);
  if (o.shared_prefix_len < 0)
    fail("--shared-prefix-len must be >= 0 (got {})", o.shared_prefix_len);
  if (o.multi_turn < 0) fail("--multi-turn must be >= 0 (got {})", o.multi_turn);
  if (o.images_per_request < 1 || o.images_per_request > 64)
    fail("--images-per-request must be in [1, 64] (got {})", o.images_per_request);
  if (!(o.image_fraction >= 0 && o.image_fraction <= 1))
    fail("--image-fraction must be in [0, 1] (got {})", o.image_fraction);
  if (!o.image.empty() && o.multi_turn > 0) fail("--image does not combine with --multi-turn");
}

// --image: the workload, or none.
ImageWorkload image_workload(const BenchOptions& o) {
  ImageWorkload w;
  if (o.image.empty()) return w;
  std::tie(w.width, w.height) = parse_image_size(o.image);
  w.per_request = o.images_per_request;
  w.fraction = o.image_fraction;
  w.same_image = o.same_image;
  w.seed = o.seed;
  return w;
}

ProgressFn progress_printer(int concurrency) {
  if (!isatty(STDERR_FILENO)) return {};
  return [concurrency](int done, int total, int errors) {
    fmt::print(stderr, "\r  concurrency {}: {}/{} done, {} errors", concurrency, done, total,
               errors);
    if (done == total) fmt::print(stderr, "\n");
  };
}

// --multi-turn: conversations whose first prompt is the shared prefix and input_len new
// ids; each later turn adds input_len new ids (and, when the server does not stream the
// generated ids, output_len stand-in ids for the reply).
ConversationPlan conversations(const BenchOptions& o, int concurrency,
                               const std::vector<int32_t>& prefix, std::mt19937_64& rng,
                               int token_max) {
  ConversationPlan plan;
  plan.concurrency = concurrency;
  const int num = o.num_requests > 0 ? o.num_requests : std::max(2 * concurrency, 4);
  for (int i = 0; i < num; i++) {
    Conversation& c = plan.conversations.emplace_back();
    c.first_prompt = prefixed_prompts(rng, prefix, 1, o.input_len, o.token_min, token_max)[0];
    c.user_turns = random_prompts(rng, o.multi_turn - 1, o.input_len, o.token_min, token_max);
    c.fallback_replies = random_prompts(rng, o.multi_turn - 1, o.output_len, o.token_min, token_max);
  }
  return plan;
}

// One run of the sweep at `concurrency`.
LoadResult run_once(const BenchOptions& o, const Endpoint& endpoint, const RequestShape& shape,
                    int concurrency, const std::vector<int32_t>& prefix, std::mt19937_64& prompt_rng,
                    std::mt19937_64& arrival_rng, int token_max) {
  if (o.multi_turn > 0) {
    ConversationPlan plan = conversations(o, concurrency, prefix, prompt_rng, token_max);
    fmt::print(stderr, "concurrency {}: {} conversations of {} turns\n", concurrency,
               plan.conversations.size(), o.multi_turn);
    return run_conversations(endpoint, shape, plan, progress_printer(concurrency));
  }
  LoadPlan plan;
  plan.concurrency = concurrency;
  plan.prompts = prefixed_prompts(prompt_rng, prefix, requests_for(o, concurrency), o.input_len,
                                  o.token_min, token_max);
  if (o.request_rate)
    plan.send_at_s = poisson_schedule(arrival_rng, int(plan.prompts.size()), *o.request_rate);
  fmt::print(stderr, "concurrency {}: sending {} requests\n", concurrency, plan.prompts.size());
  return run_load(endpoint, shape, plan, progress_printer(concurrency));
}

// One short request before measuring: it warms the server and finds out whether the
// server takes min_tokens/ignore_eos (vLLM's extensions; a strict server answers 400).
// Returns the shape to use; throws tandem::Error when even the plain request fails.
RequestShape probe(const Endpoint& endpoint, RequestShape shape, const BenchOptions& o,
                   int token_max) {
  std::mt19937_64 rng(o.seed ^ 0x9e3779b97f4a7c15ull);  // not the sweep's stream
  std::vector<int32_t> prompt = random_prompts(rng, 1, o.input_len, o.token_min, token_max)[0];
  RequestShape small = shape;
  small.max_tokens = std::min(shape.max_tokens, 4);
  // Index -1: with --image, a request that carries images (if any does), unlike any other.
  RequestRecord r = send_completion(endpoint, small, prompt, steady_seconds(), false, -1);
  if (r.ok) return shape;
  if (r.error.rfind("HTTP 400", 0) == 0 && shape.force_length) {
    small.force_length = false;
    RequestRecord plain = send_completion(endpoint, small, prompt, steady_seconds(), false, -1);
    if (plain.ok) {
      fmt::print(stderr,
                 "warning: the server refused min_tokens/ignore_eos ({}); requests may stop "
                 "before --output-len at an end-of-sequence token\n",
                 r.error);
      shape.force_length = false;
      return shape;
    }
  }
  fail("the warm-up request to {}{}{} failed: {}", endpoint.origin, endpoint.prefix,
       request_path(shape), r.error);
}

// Output tokens/s, mean TPOT and (for images) mean TTFT of two classes of requests apart:
// with --json-schema the constrained ones and the others (the unconstrained rows must not
// slow down beside constrained ones); with --image-fraction < 1 those with images and the
// text-only ones.
void report_classes(const LoadResult& result, bool (*in_class)(const RequestRecord&),
                    const char* names[2]) {
  int64_t tokens[2] = {0, 0};
  double tpot[2] = {0, 0}, ttft[2] = {0, 0};
  int n[2] = {0, 0}, n_tpot[2] = {0, 0};
  for (const RequestRecord& r : result.records) {
    if (!r.ok) continue;
    const int c = in_class(r) ? 1 : 0;
    ttft[c] += r.ttft_s;
    n[c]++;
    tokens[c] += r.num_output_tokens;
    if (auto t = time_per_output_token(r)) {
      tpot[c] += *t;
      n_tpot[c]++;
    }
  }
  if (n[1] == 0) return;
  for (int c : {1, 0}) {
    if (n[c] == 0) continue;
    fmt::print(
        "  {:<13} {:>4} requests  {:>9.1f} output tok/s  mean TPOT {:.2f} ms  mean TTFT "
        "{:.1f} ms\n",
        names[c], n[c], double(tokens[c]) / result.duration_s,
        n_tpot[c] ? 1e3 * tpot[c] / n_tpot[c] : 0.0, 1e3 * ttft[c] / n[c]);
  }
}

void report_run(const RunSummary& s, const LoadResult& result) {
  fmt::print(stderr, "  concurrency {}: {} requests in {:.2f} s, {} errors\n", s.concurrency,
             s.num_requests, s.duration_s, s.num_errors);
  if (std::any_of(result.records.begin(), result.records.end(),
                  [](const RequestRecord& r) { return r.cached_tokens.has_value(); }))
    fmt::print(stderr, "  prompt tokens read from the server's prefix cache: {} of {} ({:.1f}%)\n",
               s.total_cached_tokens, s.total_prompt_tokens,
               s.total_prompt_tokens ? 100.0 * double(s.total_cached_tokens) / double(s.total_prompt_tokens) : 0.0);
  for (const RequestRecord& r : result.records)
    if (!r.ok) {
      fmt::print(stderr, "  first error: {}\n", r.error);
      break;
    }
  fmt::print("{}", table_row(s));
  const char* constrained[2] = {"unconstrained", "constrained"};
  report_classes(
      result, [](const RequestRecord& r) { return r.constrained; }, constrained);
  const char* images[2] = {"text only", "with images"};
  report_classes(
      result, [](const RequestRecord& r) { return r.with_images; }, images);
  std::fflush(stdout);
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{} {}: cannot open for writing", what, path);
  out << text;
  if (!out) fail("{} {}: write failed", what, path);
  fmt::print(stderr, "wrote {}\n", path);
}

void write_outputs(const BenchOptions& o, const BenchSetup& setup, std::vector<RunSummary> runs,
                   const std::vector<std::vector<RequestRecord>>& records) {
  if (!o.json_path.empty())
    write_file(o.json_path, bench_json(setup, runs, records).dump(2) + "\n", "--json");
  if (!o.plot_path.empty()) {
    std::stable_sort(runs.begin(), runs.end(),
                     [](const auto& a, const auto& b) { return a.concurrency < b.concurrency; });
    std::string title = fmt::format("{}: input {}, output {} tokens", setup.model, setup.input_len,
                                    setup.output_len);
    write_file(o.plot_path, render_svg(sweep_plot(runs, title)), "--plot");
  }
}

}  // namespace

int run_bench(const BenchOptions& o) {
  try {
    int token_max = o.vocab ? std::min(o.token_max, *o.vocab) : o.token_max;
    validate(o, token_max);
    Endpoint endpoint = parse_endpoint(o.url);
    endpoint.api_key = o.api_key;
    endpoint.timeout_s = o.timeout_s;
    RequestShape shape;
    shape.models = o.models;
    shape.model = !o.models.empty() ? o.models[0]
                  : o.model.empty() ? discover_model(endpoint)
                                    : o.model;
    if (o.endpoint == "embeddings")
      return run_embeddings_bench(o, endpoint, shape.model, token_max);
    shape.max_tokens = o.output_len;
    shape.temperature = o.temperature;
    if (!o.json_schema_path.empty()) {
      std::ifstream in(o.json_schema_path);
      if (!in) fail("--json-schema {}: cannot open", o.json_schema_path);
      nlohmann::json schema = nlohmann::json::parse(in, nullptr, false);
      if (schema.is_discarded()) fail("--json-schema {}: not JSON", o.json_schema_path);
      if (!(o.constrained_fraction >= 0 && o.constrained_fraction <= 1))
        fail("--constrained-fraction must be in [0, 1] (got {})", o.constrained_fraction);
      shape.schema_text = schema.dump();
      shape.constrained_fraction = o.constrained_fraction;
    }
    shape.return_token_ids = o.multi_turn > 0;  // to resend each reply as generated
    shape.images = image_workload(o);
    shape = probe(endpoint, shape, o, token_max);

    BenchSetup setup{o.url,          shape.model,   o.input_len,        o.output_len,
                     o.request_rate, o.temperature, o.seed,             shape.force_length,
                     o.shared_prefix_len, o.multi_turn};
    fmt::print("{}\n", describe_setup(setup));
    if (shape.images.on())
      fmt::print("images: {}x{} PNG, {} per request, on {:.0f}% of the requests, {}\n",
                 shape.images.width, shape.images.height, shape.images.per_request,
                 100 * shape.images.fraction,
                 shape.images.same_image ? "the same in every request" : "new in every request");
    fmt::print("{}", table_header());
    std::fflush(stdout);
    std::mt19937_64 prompt_rng(o.seed);
    std::mt19937_64 arrival_rng(o.seed + 1);
    std::mt19937_64 prefix_rng(o.seed + 2);
    const std::vector<int32_t> prefix =
        random_prompts(prefix_rng, 1, o.shared_prefix_len, o.token_min, token_max)[0];
    std::vector<RunSummary> runs;
    std::vector<std::vector<RequestRecord>> records;
    for (int c : o.concurrency) {
      LoadResult result =
          run_once(o, endpoint, shape, c, prefix, prompt_rng, arrival_rng, token_max);
      runs.push_back(summarize(result.records, c, o.request_rate, result.duration_s));
      report_run(runs.back(), result);
      if (o.multi_turn > 0) fmt::print("{}", turn_table(result.records, o.multi_turn));
      records.push_back(std::move(result.records));
    }
    write_outputs(o, setup, runs, records);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
