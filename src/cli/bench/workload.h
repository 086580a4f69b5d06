// What a bench run sends: random token-id prompts and, for --request-rate, a Poisson
// arrival schedule. Both come from one seeded generator, so a sweep is reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tandem::cli::bench {

// `num` prompts of `len` ids, each uniform in [token_min, token_max). Prompts are drawn
// afresh for every run of a sweep (no shared prefixes for a prefix cache to reuse).
std::vector<std::vector<int32_t>> random_prompts(std::mt19937_64& rng, int num, int len,
                                                 int token_min, int token_max);

// `prefix` + a fresh prompt of `len` ids for each of `num` (--shared-prefix-len).
std::vector<std::vector<int32_t>> prefixed_prompts(std::mt19937_64& rng, const std::vector<int32_t>& prefix,
                                                   int num, int len, int token_min, int token_max);

// Send times (seconds after the start) of `num` Poisson arrivals at `rate` per second:
// cumulative sums of exponential gaps; the first request goes at 0.
std::vector<double> poisson_schedule(std::mt19937_64& rng, int num, double rate);

}  // namespace tandem::cli::bench
