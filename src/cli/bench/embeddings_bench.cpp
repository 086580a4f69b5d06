#include "cli/bench/embeddings_bench.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "cli/bench/bench_report.h"
#include "cli/bench/workload.h"
#include "core/error.h"
#include "eval/http_error.h"

namespace tandem::cli::bench {
namespace {

using nlohmann::json;

// The answer's vectors, or why it is not one: a list `data` of n objects, each with an
// `embedding` (a list of numbers, or a base64 string).
std::string check_answer(const json& j, size_t n) {
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    return "the answer has no 'data' list";
  if (j["data"].size() != n) return fmt::format("{} vectors for {} inputs", j["data"].size(), n);
  for (const json& d : j["data"]) {
    const json* e = d.is_object() && d.contains("embedding") ? &d["embedding"] : nullptr;
    if (!e || !((e->is_array() && !e->empty()) ||
                (e->is_string() && !e->get_ref<const std::string&>().empty())))
      return "an item of 'data' has no embedding";
  }
  return "";
}

int requests_in(const BenchOptions& o, int concurrency) {
  return o.num_requests > 0 ? o.num_requests : std::max(4 * concurrency, 16);
}

// One run: requests of embed_batch fresh prompts each.
LoadResult run_once(const BenchOptions& o, const Endpoint& endpoint, const std::string& model,
                    int concurrency, std::mt19937_64& prompt_rng, std::mt19937_64& arrival_rng,
                    int token_max) {
  const int n = requests_in(o, concurrency);
  std::vector<std::vector<std::vector<int32_t>>> inputs;
  for (int i = 0; i < n; i++)
    inputs.push_back(
        random_prompts(prompt_rng, o.embed_batch, o.input_len, o.token_min, token_max));
  std::vector<double> send_at;
  if (o.request_rate) send_at = poisson_schedule(arrival_rng, n, *o.request_rate);
  fmt::print(stderr, "concurrency {}: sending {} requests of {} inputs\n", concurrency, n,
             o.embed_batch);
  return run_jobs(n, 1, concurrency, {}, [&](int i, double start) {
    if (!send_at.empty()) {
      const double wait = start + send_at[size_t(i)] - steady_seconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    return std::vector<RequestRecord>{
        send_embeddings(endpoint, model, inputs[size_t(i)], o.embed_encoding, start)};
  });
}

void validate(const BenchOptions& o) {
  if (o.embed_batch < 1) fail("--embed-batch must be >= 1 (got {})", o.embed_batch);
  if (o.embed_encoding != "float" && o.embed_encoding != "base64")
    fail("--embed-encoding must be float or base64 (got '{}')", o.embed_encoding);
  if (o.multi_turn > 0 || o.shared_prefix_len > 0 || !o.json_schema_path.empty())
    fail("--endpoint embeddings takes no --multi-turn, --shared-prefix-len or --json-schema");
}

}  // namespace

std::string embeddings_body(const std::string& model,
                            const std::vector<std::vector<int32_t>>& inputs,
                            const std::string& encoding_format) {
  return json{{"model", model}, {"input", inputs}, {"encoding_format", encoding_format}}.dump();
}

RequestRecord send_embeddings(const Endpoint& endpoint, const std::string& model,
                              const std::vector<std::vector<int32_t>>& inputs,
                              const std::string& encoding_format, double run_start_s) {
  RequestRecord rec;
  for (const auto& in : inputs) rec.num_prompt_tokens += int(in.size());
  const double sent = steady_seconds();
  rec.start_s = sent - run_start_s;
  HttpAnswer a;
  try {
    a = post_json(endpoint, "/v1/embeddings", embeddings_body(model, inputs, encoding_format));
  } catch (const std::exception& e) {  // e.g. std::bad_alloc; keep the run going
    a.error = std::string("client: ") + e.what();
  }
  rec.e2e_s = rec.ttft_s = steady_seconds() - sent;
  if (!a.error.empty()) {
    rec.error = "connection: " + a.error;
  } else if (a.status != 200) {
    rec.error = eval::http_error_text(a.status, a.body);
  } else {
    const json j = json::parse(a.body, nullptr, false);
    rec.error = check_answer(j, inputs.size());
    if (rec.error.empty()) {
      rec.num_output_tokens = int(inputs.size());
      const json* usage = j.contains("usage") && j["usage"].is_object() ? &j["usage"] : nullptr;
      if (usage && usage->contains("prompt_tokens") &&
          (*usage)["prompt_tokens"].is_number_integer())
        rec.num_prompt_tokens = (*usage)["prompt_tokens"].get<int>();
    }
  }
  rec.ok = rec.error.empty();
  return rec;
}

std::string embeddings_table_header() {
  return fmt::format("{:>5} {:>5} {:>6} {:>8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "conc",
                     "reqs", "errors", "req/s", "inputs/s", "tok/s", "lat mean", "lat p50",
                     "lat p90", "lat p99", "duration") +
         fmt::format("{:>5} {:>5} {:>6} {:>8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "", "",
                     "", "", "", "", "ms", "ms", "ms", "ms", "s");
}

std::string embeddings_table_row(const RunSummary& r, int inputs_per_request) {
  auto ms = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.1f}", *v) : std::string("-");
  };
  const double tokens_per_s = r.duration_s > 0 ? double(r.total_prompt_tokens) / r.duration_s : 0.0;
  return fmt::format(
      "{:>5} {:>5} {:>6} {:>8.2f} {:>9.1f} {:>10.1f} {:>9} {:>9} {:>9} {:>9} {:>9.2f}\n",
      r.concurrency, r.num_requests, r.num_errors, r.requests_per_s,
      r.requests_per_s * inputs_per_request, tokens_per_s, ms(r.e2e.mean), ms(r.e2e.p50),
      ms(r.e2e.p90), ms(r.e2e.p99), r.duration_s);
}

int run_embeddings_bench(const BenchOptions& o, const Endpoint& endpoint, const std::string& model,
                         int token_max) {
  validate(o);
  std::mt19937_64 warm_rng(o.seed ^ 0x9e3779b97f4a7c15ull);  // not the sweep's stream
  const RequestRecord warm = send_embeddings(
      endpoint, model, random_prompts(warm_rng, o.embed_batch, o.input_len, o.token_min, token_max),
      o.embed_encoding, steady_seconds());
  if (!warm.ok)
    fail("the warm-up request to {}{}/v1/embeddings failed: {}", endpoint.origin, endpoint.prefix,
         warm.error);
  BenchSetup setup{o.url, model, o.input_len, 0, o.request_rate, 0.f, o.seed, false, 0, 0};
  fmt::print("url {}  model {}  /v1/embeddings  {} inputs of {} tokens per request  {}\n{}", o.url,
             model, o.embed_batch, o.input_len,
             o.request_rate ? fmt::format("Poisson arrivals at {:g} req/s", *o.request_rate)
                            : "closed loop",
             embeddings_table_header());
  std::fflush(stdout);
  std::mt19937_64 prompt_rng(o.seed), arrival_rng(o.seed + 1);
  std::vector<RunSummary> runs;
  std::vector<std::vector<RequestRecord>> records;
  for (int c : o.concurrency) {
    LoadResult result = run_once(o, endpoint, model, c, prompt_rng, arrival_rng, token_max);
    runs.push_back(summarize(result.records, c, o.request_rate, result.duration_s));
    for (const RequestRecord& r : result.records)
      if (!r.ok) {
        fmt::print(stderr, "  first error: {}\n", r.error);
        break;
      }
    fmt::print("{}", embeddings_table_row(runs.back(), o.embed_batch));
    std::fflush(stdout);
    records.push_back(std::move(result.records));
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path, std::ios::binary);
    if (!out) fail("--json {}: cannot open for writing", o.json_path);
    json doc = bench_json(setup, runs, records);
    doc["setup"]["endpoint"] = "embeddings";
    doc["setup"]["inputs_per_request"] = o.embed_batch;
    out << doc.dump(2) << "\n";
    if (!out) fail("--json {}: write failed", o.json_path);
  }
  return 0;
}

}  // namespace tandem::cli::bench
