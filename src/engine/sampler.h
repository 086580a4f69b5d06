// Sampler: picks one token from a row's logits under that row's parameters, with the
// row's own RNG stream (a request with a seed gets the same tokens whatever else runs).
// Order, as HF and vLLM apply it: repetition/presence/frequency penalties, temperature,
// top-k, top-p, min-p, then a draw. Logprobs are those of the model's raw distribution.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/request.h"

namespace tandem {

class Sampler {
 public:
  // `fallback_seed` seeds the stream when the request has no seed of its own.
  Sampler(SamplingParams params, uint64_t fallback_seed);

  // logits [V] (modified in place). `prompt` and `generated` feed the penalties.
  GeneratedToken sample(std::span<float> logits, std::span<const int32_t> prompt,
                        std::span<const int32_t> generated, int top_logprobs);

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                       std::span<const int32_t> generated) const;
  int32_t draw(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
};

// log_softmax of `logits` at `token`, and the k best (token, logprob), best first.
float token_logprob(std::span<const float> logits, int32_t token, int k,
                    std::vector<TokenLogprob>* top);

}  // namespace tandem
