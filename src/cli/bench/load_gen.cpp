#include "cli/bench/load_gen.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "cli/bench/sse_stream.h"
#include "core/error.h"
#include "eval/http_error.h"
// httplib's class layouts depend on its feature macros: include it the way the server does.
#include "server/http/httplib_types.h"

namespace tandem::cli::bench {
namespace {

using nlohmann::json;

httplib::Headers request_headers(const Endpoint& endpoint) {
  httplib::Headers h = {{"Accept", "text/event-stream, application/json"}};
  if (endpoint.api_key) h.emplace("Authorization", "Bearer " + *endpoint.api_key);
  return h;
}

void configure(httplib::Client& client, const Endpoint& endpoint) {
  // httplib writes the headers and the body separately: without TCP_NODELAY, Nagle holds
  // the body until the server's delayed ACK (~40 ms), which would land in every TTFT.
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(10, 0);
  client.set_write_timeout(30, 0);
  client.set_read_timeout(endpoint.timeout_s, 0);
}

// httplib's error names ("Connection", "Read") with what they mean here.
std::string transport_error(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "could not connect (is the server running?)";
    case httplib::Error::Read:
      return "read failed or timed out (--timeout)";
    case httplib::Error::Write:
      return "write failed";
    default:
      return httplib::to_string(e);
  }
}

// The verdict on a finished exchange; fills ok/error/num_output_tokens/ttft.
void judge(RequestRecord& rec, const httplib::Result& result, int status,
           const std::string& error_body, const StreamTally& tally) {
  if (!result) {
    rec.error = "connection: " + transport_error(result.error());
  } else if (status != 200) {
    rec.error = eval::http_error_text(status, error_body);
  } else if (tally.error) {
    rec.error = "stream error: " + *tally.error;
  } else if (!tally.done) {
    rec.error = "the stream ended without data: [DONE]";
  }
  rec.ok = rec.error.empty();
  rec.num_output_tokens = tally.usage_completion_tokens.value_or(tally.num_content_chunks);
  rec.cached_tokens = tally.usage_cached_tokens;
  rec.output_ids = tally.token_ids;
  rec.ttft_s = rec.arrivals_s.empty() ? rec.e2e_s : rec.arrivals_s.front();
}

void sleep_until_seconds(double t) {
  double wait = t - steady_seconds();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
}

}  // namespace

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Endpoint parse_endpoint(const std::string& url) {
  size_t scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    fail("--url '{}': expected http://host[:port][/path] (or https://)", url);
  size_t host_start = scheme_end + 3;
  size_t path_start = std::min(url.find('/', host_start), url.size());
  if (path_start == host_start) fail("--url '{}': no host", url);
  Endpoint e;
  e.origin = url.substr(0, path_start);
  std::string path = url.substr(path_start);
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
    path.resize(path.size() - 3);
  e.prefix = path;
  return e;
}

RequestShape RequestShape::for_request(int i) const {
  RequestShape one = *this;
  if (!models.empty()) one.model = models[size_t(i) % models.size()];
  return one;
}

bool RequestShape::constrained(int i) const {
  if (schema_text.empty()) return false;
  return std::floor(double(i + 1) * constrained_fraction) > std::floor(double(i) * constrained_fraction);
}

const char* request_path(const RequestShape& shape) {
  return shape.images.on() ? "/v1/chat/completions" : "/v1/completions";
}

std::string completion_body(const RequestShape& shape, const std::vector<int32_t>& prompt,
                            bool constrained, int index) {
  json body = {{"model", shape.model},
               {"max_tokens", shape.max_tokens},
               {"temperature", shape.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (shape.force_length) {
    body["min_tokens"] = shape.max_tokens;
    body["ignore_eos"] = true;
  }
  if (constrained)
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "bench"}, {"strict", true}, {"schema", json::parse(shape.schema_text)}}}};
  if (shape.return_token_ids) body["return_token_ids"] = true;
  if (!shape.images.on()) {
    body["prompt"] = prompt;
    return body.dump();
  }
  json content = json::parse(image_content_json(shape.images, index, prompt_words(prompt)));
  body["messages"] = json::array({{{"role", "user"}, {"content", std::move(content)}}});
  return body.dump();
}

HttpAnswer post_json(const Endpoint& endpoint, const std::string& path, const std::string& body) {
  httplib::Client client(endpoint.origin);
  configure(client, endpoint);
  auto res = client.Post((endpoint.prefix + path).c_str(), request_headers(endpoint), body,
                         "application/json");
  if (!res) return {transport_error(res.error()), 0, {}};
  return {"", res->status, res->body};
}

std::string discover_model(const Endpoint& endpoint) {
  httplib::Client client(endpoint.origin);
  configure(client, endpoint);
  client.set_read_timeout(30, 0);
  std::string url = endpoint.origin + endpoint.prefix + "/v1/models";
  auto res = client.Get((endpoint.prefix + "/v1/models").c_str(), request_headers(endpoint));
  if (!res) fail("GET {}: {}", url, transport_error(res.error()));
  if (res->status != 200) fail("GET {}: {}", url, eval::http_error_text(res->status, res->body));
  json j = json::parse(res->body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].is_object() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    fail("GET {}: no model id in the answer (pass --model): {}", url, res->body.substr(0, 300));
  return j["data"][0]["id"].get<std::string>();
}

RequestRecord send_completion(const Endpoint& endpoint, const RequestShape& shape,
                              const std::vector<int32_t>& prompt, double run_start_s,
                              bool constrained, int index) {
  RequestRecord rec;
  rec.constrained = constrained;
  rec.with_images = shape.images.carries(index);
  rec.num_prompt_tokens = int(prompt.size());
  httplib::Client client(endpoint.origin);
  configure(client, endpoint);
  httplib::Request req;
  req.method = "POST";
  req.path = endpoint.prefix + request_path(shape);
  req.headers = request_headers(endpoint);
  req.set_header("Content-Type", "application/json");
  req.body = completion_body(shape, prompt, constrained, index);

  StreamTally tally;
  int status = 0;
  std::string error_body;
  double sent = steady_seconds();
  SseParser parser([&](std::string_view data) {
    if (tally_completion_event(data, tally)) rec.arrivals_s.push_back(steady_seconds() - sent);
  });
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status == 200) {
      parser.feed(std::string_view(data, n));
    } else if (error_body.size() < 4096) {
      error_body.append(data, n);
    }
    return true;
  };
  rec.start_s = sent - run_start_s;
  httplib::Result result = client.send(req);
  rec.e2e_s = steady_seconds() - sent;
  judge(rec, result, status, error_body, tally);
  // A chat prompt's tokens are the server's count (text and images), when it sends usage.
  if (shape.images.on() && tally.usage_prompt_tokens)
    rec.num_prompt_tokens = *tally.usage_prompt_tokens;
  return rec;
}

LoadResult run_jobs(int num_jobs, int per_job, int concurrency, const ProgressFn& progress,
                    const JobFn& job) {
  const int n = num_jobs * per_job;
  LoadResult result;
  result.records.resize(size_t(n));
  std::atomic<int> next{0};
  std::mutex mu;
  int num_done = 0, num_errors = 0;
  double last_end = 0;
  const double start = steady_seconds();
  auto worker = [&] {
    for (int i = next.fetch_add(1); i < num_jobs; i = next.fetch_add(1)) {
      std::vector<RequestRecord> recs = job(i, start);
      std::lock_guard<std::mutex> lock(mu);
      for (size_t k = 0; k < recs.size(); k++) {
        RequestRecord& rec = recs[k];
        rec.index = i * per_job + int(k);
        last_end = std::max(last_end, rec.start_s + rec.e2e_s);
        num_done++;
        num_errors += rec.ok ? 0 : 1;
        result.records[size_t(rec.index)] = std::move(rec);
        if (progress) progress(num_done, n, num_errors);
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(std::max(concurrency, 1), num_jobs); ++w) workers.emplace_back(worker);
  for (auto& t : workers) t.join();
  result.duration_s = last_end;
  return result;
}

namespace {

RequestRecord send_guarded(const Endpoint& endpoint, const RequestShape& shape,
                           const std::vector<int32_t>& prompt, double start,
                           bool constrained = false, int index = 0) {
  try {
    return send_completion(endpoint, shape, prompt, start, constrained, index);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc; keep the run going
    RequestRecord rec;
    rec.error = std::string("client: ") + e.what();
    rec.constrained = constrained;
    return rec;
  }
}

}  // namespace

LoadResult run_conversations(const Endpoint& endpoint, const RequestShape& shape,
                             const ConversationPlan& plan, const ProgressFn& progress) {
  const int turns = plan.conversations.empty() ? 1 : plan.conversations[0].num_turns();
  for (const Conversation& c : plan.conversations)
    TANDEM_CHECK(c.num_turns() == turns && int(c.fallback_replies.size()) == turns - 1);
  return run_jobs(int(plan.conversations.size()), turns, plan.concurrency, progress,
                  [&](int i, double start) {
                    const Conversation& c = plan.conversations[size_t(i)];
                    std::vector<RequestRecord> recs(static_cast<size_t>(turns));
                    std::vector<int32_t> prompt = c.first_prompt;
                    for (int t = 0; t < turns; t++) {
                      RequestRecord& rec = recs[size_t(t)];
                      rec.turn = t;
                      if (t > 0 && !recs[size_t(t) - 1].ok) {
                        rec.error = "not sent: an earlier turn failed";
                        continue;
                      }
                      rec = send_guarded(endpoint, shape, prompt, start);
                      rec.turn = t;
                      if (t + 1 == turns) break;
                      const std::vector<int32_t>& reply =
                          rec.output_ids.empty() ? c.fallback_replies[size_t(t)] : rec.output_ids;
                      prompt.insert(prompt.end(), reply.begin(), reply.end());
                      prompt.insert(prompt.end(), c.user_turns[size_t(t)].begin(),
                                    c.user_turns[size_t(t)].end());
                    }
                    return recs;
                  });
}

LoadResult run_load(const Endpoint& endpoint, const RequestShape& shape, const LoadPlan& plan,
                    const ProgressFn& progress) {
  const int n = int(plan.prompts.size());
  TANDEM_CHECK(plan.send_at_s.empty() || int(plan.send_at_s.size()) == n);
  return run_jobs(n, 1, plan.concurrency, progress, [&](int i, double start) {
    if (!plan.send_at_s.empty()) sleep_until_seconds(start + plan.send_at_s[size_t(i)]);
    return std::vector<RequestRecord>{send_guarded(
        endpoint, shape.for_request(i), plan.prompts[size_t(i)], start, shape.constrained(i), i)};
  });
}

}  // namespace tandem::cli::bench
