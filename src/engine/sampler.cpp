#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/error.h"

namespace tandem {

Sampler::Sampler(SamplingParams params, uint64_t fallback_seed)
    : params_(params), seed_(params.seed.value_or(fallback_seed)) {}

bool Sampler::needs_history() const {
  return params_.repetition_penalty != 1.f || params_.presence_penalty != 0.f ||
         params_.frequency_penalty != 0.f;
}

SampleRow Sampler::row(std::span<const int32_t> tokens, int num_prompt, int top_logprobs,
                       int num_in_flight) const {
  SampleRow r;
  r.temperature = params_.greedy() ? 0.f : params_.temperature;
  r.top_k = params_.top_k;
  r.top_p = params_.top_p;
  r.min_p = params_.min_p;
  r.repetition_penalty = params_.repetition_penalty;
  r.presence_penalty = params_.presence_penalty;
  r.frequency_penalty = params_.frequency_penalty;
  r.seed = seed_;
  r.counter = uint64_t(int64_t(tokens.size()) + num_in_flight - num_prompt);
  r.top_logprobs = top_logprobs;
  if (!needs_history()) return r;
  TANDEM_CHECK(num_in_flight == 0, "penalties read every token, {} are still in flight",
               num_in_flight);
  bool repetition = params_.repetition_penalty != 1.f;
  // Distinct tokens with their output counts. Prompt-only tokens matter to the
  // repetition penalty alone (presence/frequency count the output).
  std::unordered_map<int32_t, int32_t> counts;
  auto prompt = tokens.first(size_t(num_prompt));
  auto output = tokens.subspan(size_t(num_prompt));
  if (repetition)
    for (int32_t t : prompt) counts.try_emplace(t, 0);
  for (int32_t t : output) counts[t]++;
  r.penalty_tokens.reserve(counts.size());
  r.output_counts.reserve(counts.size());
  for (auto [t, n] : counts) {
    r.penalty_tokens.push_back(t);
    r.output_counts.push_back(n);
  }
  return r;
}

GeneratedToken to_generated(const SampledToken& t) {
  GeneratedToken g;
  g.token = t.token;
  g.logprob = t.logprob;
  for (size_t i = 0; i < t.top_tokens.size(); i++)
    g.top_logprobs.push_back({t.top_tokens[i], t.top_logprobs[i]});
  return g;
}

float token_logprob(std::span<const float> logits, int32_t token, int k,
                    std::vector<TokenLogprob>* top) {
  float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l - max));
  float log_z = max + float(std::log(sum));
  if (top && k > 0) {
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    size_t kk = std::min(size_t(k), idx.size());
    std::partial_sort(idx.begin(), idx.begin() + long(kk), idx.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    top->clear();
    for (size_t i = 0; i < kk; i++) top->push_back({idx[i], logits[size_t(idx[i])] - log_z});
  }
  return logits[size_t(token)] - log_z;
}

}  // namespace tandem
