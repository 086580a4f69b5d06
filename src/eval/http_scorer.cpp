#include "eval/http_scorer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "eval/http_error.h"
// httplib's class layouts depend on its feature macros: include it the way the server does.
#include "server/http/httplib_types.h"

namespace tandem::eval {

using nlohmann::json;

namespace {

std::string transport_error(httplib::Error e) {
  if (e == httplib::Error::Connection) return "could not connect (is the server running?)";
  if (e == httplib::Error::Read) return "the read failed or timed out";
  return httplib::to_string(e);
}

// The text of a completions choice's echoed logprobs: its tokens, their logprobs (null
// for the first) and top alternatives.
struct EchoedTokens {
  std::vector<std::string> tokens;
  const json* token_logprobs = nullptr;
  const json* top_logprobs = nullptr;
};

EchoedTokens echoed(const json& answer) {
  const json* lp = nullptr;
  if (answer.contains("choices") && answer["choices"].is_array() && !answer["choices"].empty())
    if (const json& c = answer["choices"][0]; c.is_object() && c.contains("logprobs")) lp = &c["logprobs"];
  if (!lp || !lp->is_object() || !lp->contains("tokens") || !(*lp)["tokens"].is_array() ||
      !lp->contains("token_logprobs") || !(*lp)["token_logprobs"].is_array() ||
      (*lp)["token_logprobs"].size() != (*lp)["tokens"].size())
    fail("the answer has no echoed logprobs (choices[0].logprobs.tokens / token_logprobs)");
  EchoedTokens e;
  for (const json& t : (*lp)["tokens"]) e.tokens.push_back(t.is_string() ? t.get<std::string>() : t.dump());
  e.token_logprobs = &(*lp)["token_logprobs"];
  if (lp->contains("top_logprobs") && (*lp)["top_logprobs"].is_array()) e.top_logprobs = &(*lp)["top_logprobs"];
  return e;
}

double logprob_at(const EchoedTokens& e, size_t j) {
  const json& v = (*e.token_logprobs)[j];
  if (!v.is_number()) fail("token {} of the echo has no logprob", j);
  return v.get<double>();
}

// Whether token j was the best alternative the server listed at its position.
bool is_top(const EchoedTokens& e, size_t j) {
  if (!e.top_logprobs || j >= e.top_logprobs->size()) return false;
  const json& top = (*e.top_logprobs)[j];
  if (!top.is_object() || top.empty()) return false;
  std::optional<std::string> best;
  double best_logprob = 0;
  for (auto it = top.begin(); it != top.end(); ++it)
    if (it.value().is_number() && (!best || it.value().get<double>() > best_logprob)) {
      best = it.key();
      best_logprob = it.value().get<double>();
    }
  return best && *best == e.tokens[j];
}

std::string_view trim_end(std::string_view s) {
  size_t end = s.find_last_not_of(" \t\n\r\f\v");
  return end == std::string_view::npos ? std::string_view() : s.substr(0, end + 1);
}

}  // namespace

HttpScorer::HttpScorer(HttpScorerConfig config) : config_(std::move(config)) {
  std::string url = config_.url;
  while (url.ends_with('/')) url.pop_back();
  if (url.ends_with("/v1")) url.resize(url.size() - 3);
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) fail("--url {}: give a scheme and host, e.g. http://127.0.0.1:8080", config_.url);
  size_t path = url.find('/', scheme + 3);
  origin_ = url.substr(0, path);
  prefix_ = path == std::string::npos ? "" : url.substr(path);
  if (config_.model.empty()) {
    httplib::Client client(origin_);
    httplib::Headers headers;
    if (!config_.api_key.empty()) headers.emplace("Authorization", "Bearer " + config_.api_key);
    auto res = client.Get((prefix_ + "/v1/models").c_str(), headers);
    if (!res) fail("GET {}/v1/models: {}", url, transport_error(res.error()));
    if (res->status != 200) fail("GET {}/v1/models: {}", url, http_error_text(res->status, res->body));
    json j = json::parse(res->body, nullptr, false);
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
        !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
      fail("GET {}/v1/models: no model id in the answer (pass --model)", url);
    config_.model = j["data"][0]["id"].get<std::string>();
  }
  probe();
}

void HttpScorer::probe() {
  std::string why;
  std::optional<json> a = try_post(prefix_ + "/v1/completions", echo_body("Hello world", 1), &why);
  try {
    prompt_logprobs_ = a && echoed(*a).tokens.size() >= 2 && (*echoed(*a).token_logprobs)[1].is_number();
  } catch (const Error&) {
    prompt_logprobs_ = false;
  }
  json t = {{"model", config_.model}, {"prompt", "Hello"}, {"add_special_tokens", false}};
  std::optional<json> tok = try_post(prefix_ + "/tokenize", t, &why);
  tokenize_ = tok && tok->contains("tokens") && (*tok)["tokens"].is_array();
  if (tokenize_ && tok->contains("max_model_len") && (*tok)["max_model_len"].is_number_integer())
    max_model_len_ = (*tok)["max_model_len"].get<int>();
}

json HttpScorer::echo_body(json prompt, int logprobs) const {
  return {{"model", config_.model}, {"prompt", std::move(prompt)}, {"max_tokens", 0},
          {"echo", true},           {"logprobs", logprobs},         {"temperature", 0}};
}

std::optional<json> HttpScorer::try_post(const std::string& path, const json& body,
                                         std::string* why) const {
  httplib::Client client(origin_);
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(config_.timeout_seconds, 0);
  httplib::Headers headers;
  if (!config_.api_key.empty()) headers.emplace("Authorization", "Bearer " + config_.api_key);
  const std::string text = body.dump();
  for (int attempt = 1;; attempt++) {
    auto res = client.Post(path, headers, text, "application/json");
    bool retry = false;
    if (!res) {
      *why = transport_error(res.error());
      retry = true;
    } else if (res->status == 200) {
      json j = json::parse(res->body, nullptr, false);
      if (!j.is_discarded()) return j;
      *why = "the answer is not JSON";
    } else {
      *why = http_error_text(res->status, res->body);
      retry = res->status >= 500;
    }
    if (!retry || attempt >= config_.max_attempts) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(250 << std::min(attempt - 1, 4)));
  }
}

std::vector<json> HttpScorer::post_all(const std::string& path, const std::vector<json>& bodies) const {
  std::vector<json> answers(bodies.size());
  std::vector<std::string> errors(bodies.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < bodies.size();)
      if (std::optional<json> a = try_post(path, bodies[i], &errors[i])) {
        answers[i] = std::move(*a);
        errors[i].clear();
      }
  };
  std::vector<std::thread> threads;
  const size_t num_threads = std::min(bodies.size(), size_t(std::max(config_.concurrency, 1)));
  for (size_t t = 0; t < num_threads; t++) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  size_t num_failed = 0;
  const std::string* first = nullptr;
  for (const std::string& e : errors)
    if (!e.empty() && num_failed++ == 0) first = &e;
  if (num_failed > 0)
    fail("{} of {} requests to {}{} failed (after up to {} attempts each); the first: {}", num_failed,
         bodies.size(), origin_, path, config_.max_attempts, *first);
  return answers;
}

std::vector<Loglikelihood> HttpScorer::loglikelihood(std::span<const LoglikelihoodRequest> requests) {
  if (!prompt_logprobs_) fail("{} does not return prompt logprobs (echo + logprobs)", config_.url);
  // One request per whole text, one per distinct context (the choices of an item share it).
  std::vector<json> bodies;
  std::map<std::string, size_t, std::less<>> context_body;
  for (const LoglikelihoodRequest& r : requests) bodies.push_back(echo_body(r.context + r.continuation, 1));
  for (const LoglikelihoodRequest& r : requests) {
    std::string kept(trim_end(r.context));
    if (kept.empty()) fail("the context '{}' has no tokens to condition on", r.context);
    if (context_body.emplace(kept, bodies.size()).second) bodies.push_back(echo_body(kept, 0));
  }
  const std::vector<json> answers = post_all(prefix_ + "/v1/completions", bodies);
  std::vector<Loglikelihood> out;
  for (size_t i = 0; i < requests.size(); i++) {
    const EchoedTokens whole = echoed(answers[i]);
    const EchoedTokens own = echoed(answers[context_body.find(trim_end(requests[i].context))->second]);
    const size_t shared = size_t(std::mismatch(own.tokens.begin(), own.tokens.end(), whole.tokens.begin(),
                                               whole.tokens.end()).first - own.tokens.begin());
    if (shared == 0) fail("the context '{}' has no tokens to condition on", requests[i].context);
    if (shared == whole.tokens.size())
      fail("the continuation '{}' adds no tokens to its context", requests[i].continuation);
    Loglikelihood r{.logprob = 0, .num_tokens = int(whole.tokens.size() - shared), .greedy = true};
    for (size_t j = shared; j < whole.tokens.size(); j++) {
      r.logprob += logprob_at(whole, j);
      r.greedy = r.greedy && is_top(whole, j);
    }
    out.push_back(r);
  }
  return out;
}

std::vector<std::string> HttpScorer::generate(std::span<const GenerateRequest> requests) {
  std::vector<json> bodies;
  for (const GenerateRequest& g : requests) {
    json b = {{"model", config_.model}, {"prompt", g.prompt}, {"max_tokens", g.max_tokens},
              {"temperature", 0}};
    if (!g.stop.empty()) b["stop"] = g.stop;
    bodies.push_back(std::move(b));
  }
  std::vector<std::string> out;
  for (const json& a : post_all(prefix_ + "/v1/completions", bodies)) {
    if (!a.contains("choices") || !a["choices"].is_array() || a["choices"].empty() ||
        !a["choices"][0].contains("text") || !a["choices"][0]["text"].is_string())
      fail("a completion answer has no choices[0].text");
    out.push_back(a["choices"][0]["text"].get<std::string>());
  }
  return out;
}

std::vector<WindowNll> HttpScorer::rolling_nll(std::string_view text, std::optional<int> window,
                                               std::optional<size_t> max_windows) {
  if (!prompt_logprobs_ || !tokenize_)
    fail("{}: perplexity needs prompt logprobs and /tokenize", config_.url);
  json t = {{"model", config_.model}, {"prompt", std::string(text)}, {"add_special_tokens", false}};
  const json tokenized = post_all(prefix_ + "/tokenize", std::vector<json>(1, t))[0];
  std::vector<int32_t> ids = tokenized.value("tokens", std::vector<int32_t>{});
  const size_t length = size_t(window.value_or(max_model_len_));
  if (length < 2) fail("{}: no window length (give the task a window)", config_.url);
  std::vector<json> bodies;
  for (size_t start = 0; start + 1 < ids.size(); start += length) {
    if (max_windows && bodies.size() == *max_windows) break;
    const size_t n = std::min(length, ids.size() - start);
    bodies.push_back(echo_body(std::vector<int32_t>(ids.begin() + std::ptrdiff_t(start),
                                                    ids.begin() + std::ptrdiff_t(start + n)), 0));
  }
  if (bodies.empty()) fail("perplexity needs a text of at least 2 tokens (got {})", ids.size());
  std::vector<WindowNll> out;
  for (const json& a : post_all(prefix_ + "/v1/completions", bodies)) {
    const EchoedTokens e = echoed(a);
    WindowNll w;
    for (size_t j = 1; j < e.tokens.size(); j++) w.total_nll -= logprob_at(e, j);
    w.num_scored = int64_t(e.tokens.size()) - 1;
    out.push_back(w);
  }
  return out;
}

}  // namespace tandem::eval
