#include "cli/bench/workload.h"

#include "core/error.h"

namespace tandem::cli::bench {

std::vector<std::vector<int32_t>> random_prompts(std::mt19937_64& rng, int num, int len,
                                                 int token_min, int token_max) {
  TANDEM_CHECK(token_min < token_max, "token range [{}, {})", token_min, token_max);
  std::uniform_int_distribution<int32_t> token(token_min, token_max - 1);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(num),
                                            std::vector<int32_t>(static_cast<size_t>(len)));
  for (auto& prompt : prompts)
    for (auto& id : prompt) id = token(rng);
  return prompts;
}

std::vector<std::vector<int32_t>> prefixed_prompts(std::mt19937_64& rng, const std::vector<int32_t>& prefix,
                                                   int num, int len, int token_min, int token_max) {
  std::vector<std::vector<int32_t>> prompts = random_prompts(rng, num, len, token_min, token_max);
  for (auto& p : prompts) p.insert(p.begin(), prefix.begin(), prefix.end());
  return prompts;
}

std::vector<double> poisson_schedule(std::mt19937_64& rng, int num, double rate) {
  TANDEM_CHECK(rate > 0, "rate {}", rate);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> at(static_cast<size_t>(num));
  double t = 0;
  for (auto& a : at) {
    a = t;
    t += gap(rng);
  }
  return at;
}

}  // namespace tandem::cli::bench
