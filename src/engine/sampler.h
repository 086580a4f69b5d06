// Sampler: a request's sampling parameters, resolved once per step into the SampleRow the
// backend's sampling op draws from (backend/sampling.h defines the function; both
// backends compute it). The row's random stream is the request's seed, or a fallback
// drawn when the sequence was created, and its counter is the number of tokens generated
// so far — so a seeded request gets the same tokens whatever else runs, and a preempted
// sequence redraws exactly the tokens it would have drawn.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/sampling.h"
#include "engine/request.h"

namespace tandem {

class Sampler {
 public:
  // `fallback_seed` is the stream when the request has no seed of its own.
  Sampler(SamplingParams params, uint64_t fallback_seed);

  // The row for the next token of a sequence whose tokens are `tokens` (the first
  // `num_prompt` are the prompt) followed by `num_in_flight` tokens not received yet: the
  // draw's counter counts them all. Penalty lists are built only when a penalty is on, and
  // then every token must be known (needs_history()).
  SampleRow row(std::span<const int32_t> tokens, int num_prompt, int top_logprobs,
                int num_in_flight = 0) const;

  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }
  // True when row() reads the tokens themselves (a penalty is on), not just their count.
  bool needs_history() const;

 private:
  SamplingParams params_;
  uint64_t seed_;
};

// The engine's form of a sampled token.
GeneratedToken to_generated(const SampledToken& t);

// log_softmax of `logits` at `token`, and the k best (token, logprob), best first.
float token_logprob(std::span<const float> logits, int32_t token, int k,
                    std::vector<TokenLogprob>* top);

}  // namespace tandem
