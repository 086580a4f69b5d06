// What an evaluation asks of a model, and nothing about how it runs: log-likelihoods of
// continuations, greedy generations, and per-window negative log-likelihood of a text.
// The reference implementation is teacher_forced_scorer.h; the batched engine and an HTTP
// client against an OpenAI-compatible server are the others this interface is for. Every
// call takes a batch, so an implementation may run the whole batch together.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::eval {

struct LoglikelihoodRequest {
  std::string context;       // never empty
  std::string continuation;  // never empty
};

struct Loglikelihood {
  double logprob = 0;   // Σ ln p(continuation token | everything before it)
  int num_tokens = 0;   // continuation tokens scored
  bool greedy = false;  // every continuation token was the argmax at its position
};

struct GenerateRequest {
  std::string prompt;
  std::vector<std::string> stop;  // generation ends before the first occurrence of any
  int max_tokens = 64;
};

// One window of a perplexity run: tokens 1..len-1 of the window are scored.
struct WindowNll {
  double total_nll = 0;  // Σ −ln p over the window's scored tokens
  int64_t num_scored = 0;
};

class Scorer {
 public:
  virtual ~Scorer() = default;

  // ln p(continuation | context) for each request, in order.
  virtual std::vector<Loglikelihood> loglikelihood(
      std::span<const LoglikelihoodRequest> requests) = 0;

  // The greedy continuation of each prompt (end-of-sequence tokens end it and are not part
  // of the text), cut before the earliest stop string.
  virtual std::vector<std::string> generate(std::span<const GenerateRequest> requests) = 0;

  // The protocol of tools/tiny-model/README.md: `text` tokenized as one string without
  // special tokens, cut into consecutive windows of `window` tokens (default: the model's
  // context), each run from an empty cache; the first `max_windows` windows when given.
  virtual std::vector<WindowNll> rolling_nll(std::string_view text, std::optional<int> window,
                                             std::optional<size_t> max_windows) = 0;
};

}  // namespace tandem::eval
