// A Scorer over an OpenAI-compatible server's /v1/completions (tandem, vLLM, any peer):
//   loglikelihood  echo + logprobs: 1 + max_tokens: 0 on context + continuation, and on the
//                  context alone; the continuation is every token past the longest common
//                  prefix of the two echoed token lists (request_tokens.h's rule, read off
//                  the server's own tokenization);
//   generate       greedy (temperature 0) with the stop strings;
//   rolling_nll    the text tokenized by the server's /tokenize, windows sent as token ids
//                  with echo + logprobs.
// The constructor asks the server what it offers (offers_prompt_logprobs, offers_tokenize):
// a server without prompt logprobs can still run the generation tasks. Up to `concurrency`
// requests are in flight; 5xx answers and transport errors are retried, and the first
// failure that outlived its retries is the error of the whole call (after every request
// of it has ended).
#pragma once

#include <optional>
#include <span>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "eval/scorer.h"

namespace tandem::eval {

struct HttpScorerConfig {
  std::string url;      // "http://host:port"; a trailing "/v1" is accepted
  std::string model;    // empty: the first of GET /v1/models
  std::string api_key;  // empty: no Authorization header
  int concurrency = 8;
  int max_attempts = 4;      // per request, on 5xx and transport errors
  int timeout_seconds = 600;  // per request
};

class HttpScorer final : public Scorer {
 public:
  explicit HttpScorer(HttpScorerConfig config);

  const std::string& model() const { return config_.model; }
  bool offers_prompt_logprobs() const { return prompt_logprobs_; }
  bool offers_tokenize() const { return tokenize_; }

  std::vector<Loglikelihood> loglikelihood(std::span<const LoglikelihoodRequest> requests) override;
  std::vector<std::string> generate(std::span<const GenerateRequest> requests) override;
  std::vector<WindowNll> rolling_nll(std::string_view text, std::optional<int> window,
                                     std::optional<size_t> max_windows) override;

 private:
  // POSTs every body to `path`, up to `concurrency` at once; the parsed answers in order.
  // Fails naming how many failed and the first error.
  std::vector<nlohmann::json> post_all(const std::string& path,
                                       const std::vector<nlohmann::json>& bodies) const;
  // One POST with its retries; nullopt (and *why) when it failed for good.
  std::optional<nlohmann::json> try_post(const std::string& path, const nlohmann::json& body,
                                         std::string* why) const;
  // max_tokens 0, echo, `logprobs` alternatives: the prompt's own logprobs.
  nlohmann::json echo_body(nlohmann::json prompt, int logprobs) const;
  void probe();  // what the server offers

  HttpScorerConfig config_;
  std::string origin_;  // scheme://host:port
  std::string prefix_;  // a path before /v1, if the url had one
  bool prompt_logprobs_ = false;
  bool tokenize_ = false;
  int max_model_len_ = 0;  // from /tokenize when the server has it
};

}  // namespace tandem::eval
