// The batched Scorer: every request of a call goes to the engine the server runs
// (engine/engine_api.h) at once, so they share its steps (continuous batching over the
// paged KV cache, chunked prefill, the prefix cache). Log-likelihoods and perplexity windows
// are prompt-only requests (max_tokens 0) asking for the prompt logprobs of the scored
// positions (GenerationRequest::prompt_logprobs); generation is greedy with the stop strings
// in the engine. It agrees with the TeacherForcedScorer to f32 rounding, except that a
// context too long for the engine loses one more of its oldest tokens (the engine holds
// the last continuation token too).
#pragma once

#include <memory>
#include <span>

#include "engine/engine_api.h"
#include "eval/request_tokens.h"
#include "eval/scorer.h"
#include "tokenizer/tokenizer.h"

namespace tandem::eval {

class EngineScorer final : public Scorer {
 public:
  // `engine` must be running (Engine::start) and outlive the scorer.
  EngineScorer(EngineApi& engine, std::shared_ptr<const Tokenizer> tokenizer);

  std::vector<Loglikelihood> loglikelihood(std::span<const LoglikelihoodRequest> requests) override;
  std::vector<std::string> generate(std::span<const GenerateRequest> requests) override;
  std::vector<WindowNll> rolling_nll(std::string_view text, std::optional<int> window,
                                     std::optional<size_t> max_windows) override;

  // The token-level form of loglikelihood, all requests in flight together.
  std::vector<Loglikelihood> score_tokens(std::span<const RequestTokens> requests);

 private:
  EngineApi& engine_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace tandem::eval
