#include "eval/engine_scorer.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tandem::eval {

namespace {

struct Outcome {
  std::vector<GeneratedToken> prompt_logprobs;
  std::string text;
};

// Waits for the stream's last chunk; a request the engine refused or failed throws.
Outcome drain(RequestStream& stream) {
  Outcome out;
  for (;;) {
    std::optional<StreamChunk> c = stream.pop(std::chrono::milliseconds(200));
    if (!c) continue;
    if (!c->prompt_logprobs.empty()) out.prompt_logprobs = std::move(c->prompt_logprobs);
    out.text += c->text;
    if (!c->finish) continue;
    if (*c->finish == FinishReason::Error) fail("the engine: {}", c->error);
    if (*c->finish == FinishReason::Cancelled) fail("the engine cancelled a request");
    return out;
  }
}

// Every request in flight at once; their outcomes in order. On a failure the rest are
// cancelled before the error leaves.
std::vector<Outcome> run_all(EngineApi& engine, std::vector<GenerationRequest> requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.reserve(requests.size());
  for (GenerationRequest& r : requests) streams.push_back(engine.submit(std::move(r)));
  std::vector<Outcome> out;
  out.reserve(streams.size());
  try {
    for (auto& s : streams) out.push_back(drain(*s));
  } catch (const Error&) {
    for (auto& s : streams) s->cancel();
    throw;
  }
  return out;
}

// A request that only scores prompt positions [first, prompt size).
GenerationRequest scoring_request(std::vector<int32_t> prompt, int first, int top) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.f;
  r.max_tokens = 0;
  r.prompt_logprobs = PromptLogprobs{.first = first, .top = top};
  return r;
}

}  // namespace

EngineScorer::EngineScorer(EngineApi& engine, std::shared_ptr<const Tokenizer> tokenizer)
    : engine_(engine), tokenizer_(std::move(tokenizer)) {
  TANDEM_CHECK(tokenizer_ != nullptr, "the scorer needs a tokenizer");
}

std::vector<Loglikelihood> EngineScorer::score_tokens(std::span<const RequestTokens> requests) {
  const size_t max_len = size_t(engine_.model_info().max_model_len);
  std::vector<GenerationRequest> asks;
  for (const RequestTokens& t : requests) {
    TANDEM_CHECK(!t.context.empty() && !t.continuation.empty(), "empty context or continuation");
    if (t.continuation.size() >= max_len)
      fail("a continuation of {} tokens does not fit the engine's context of {}",
           t.continuation.size(), max_len);
    // The oldest context tokens go first when the whole does not fit.
    const size_t num_context = std::min(t.context.size(), max_len - t.continuation.size());
    std::vector<int32_t> prompt(t.context.end() - std::ptrdiff_t(num_context), t.context.end());
    prompt.insert(prompt.end(), t.continuation.begin(), t.continuation.end());
    asks.push_back(scoring_request(std::move(prompt), int(num_context), /*top=*/1));
  }
  std::vector<Outcome> outcomes = run_all(engine_, std::move(asks));
  std::vector<Loglikelihood> out;
  for (size_t i = 0; i < outcomes.size(); i++) {
    const std::vector<GeneratedToken>& scored = outcomes[i].prompt_logprobs;
    TANDEM_CHECK(scored.size() == requests[i].continuation.size(),
                 "the engine scored {} of {} continuation tokens", scored.size(),
                 requests[i].continuation.size());
    Loglikelihood r{.logprob = 0, .num_tokens = int(scored.size()), .greedy = true};
    for (const GeneratedToken& g : scored) {
      r.logprob += double(g.logprob);
      r.greedy = r.greedy && !g.top_logprobs.empty() && g.top_logprobs[0].token == g.token;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<Loglikelihood> EngineScorer::loglikelihood(
    std::span<const LoglikelihoodRequest> requests) {
  std::vector<RequestTokens> tokens;
  tokens.reserve(requests.size());
  for (const LoglikelihoodRequest& r : requests)
    tokens.push_back(request_tokens(*tokenizer_, r.context, r.continuation));
  return score_tokens(tokens);
}

std::vector<std::string> EngineScorer::generate(std::span<const GenerateRequest> requests) {
  const int max_len = engine_.model_info().max_model_len;
  std::vector<GenerationRequest> asks;
  std::vector<bool> asked;  // false: the prompt fills the context, nothing can follow
  for (const GenerateRequest& g : requests) {
    GenerationRequest r;
    r.prompt = tokenizer_->encode(g.prompt, true);
    if (r.prompt.empty()) fail("the prompt '{}' has no tokens", g.prompt);
    r.sampling.temperature = 0.f;
    r.max_tokens = std::min(g.max_tokens, max_len - int(r.prompt.size()));
    r.stop = g.stop;
    asked.push_back(r.max_tokens > 0);
    if (asked.back()) asks.push_back(std::move(r));
  }
  std::vector<Outcome> outcomes = run_all(engine_, std::move(asks));
  std::vector<std::string> out;
  size_t next = 0;
  for (bool a : asked) out.push_back(a ? std::move(outcomes[next++].text) : std::string());
  return out;
}

std::vector<WindowNll> EngineScorer::rolling_nll(std::string_view text, std::optional<int> window,
                                                 std::optional<size_t> max_windows) {
  std::vector<int32_t> ids = tokenizer_->encode(text, /*add_special_tokens=*/false);
  const int max_len = engine_.model_info().max_model_len;
  const size_t length = size_t(window.value_or(max_len));
  if (length < 2 || length > size_t(max_len))
    fail("a window of {} tokens does not fit the engine's context of {}", length, max_len);
  std::vector<GenerationRequest> asks;
  for (size_t start = 0; start + 1 < ids.size(); start += length) {
    if (max_windows && asks.size() == *max_windows) break;
    const size_t n = std::min(length, ids.size() - start);
    std::vector<int32_t> chunk(ids.begin() + std::ptrdiff_t(start),
                               ids.begin() + std::ptrdiff_t(start + n));
    asks.push_back(scoring_request(std::move(chunk), 1, /*top=*/0));
  }
  if (asks.empty()) fail("perplexity needs a text of at least 2 tokens (got {})", ids.size());
  std::vector<size_t> sizes;
  for (const GenerationRequest& r : asks) sizes.push_back(r.prompt.size());
  std::vector<Outcome> outcomes = run_all(engine_, std::move(asks));
  std::vector<WindowNll> out;
  for (size_t i = 0; i < outcomes.size(); i++) {
    const std::vector<GeneratedToken>& scored = outcomes[i].prompt_logprobs;
    TANDEM_CHECK(scored.size() + 1 == sizes[i], "the engine scored {} of a window's {} tokens",
                 scored.size(), sizes[i] - 1);
    WindowNll w;
    for (const GeneratedToken& g : scored) w.total_nll -= double(g.logprob);
    w.num_scored = int64_t(scored.size());
    out.push_back(w);
  }
  return out;
}

}  // namespace tandem::eval
