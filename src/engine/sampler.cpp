#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace tandem {

Sampler::Sampler(SamplingParams params, uint64_t fallback_seed)
    : params_(params), rng_(params.seed.value_or(fallback_seed)) {}

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

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> generated) const {
  if (params_.repetition_penalty != 1.f) {  // HF: over prompt and output, once per token
    std::vector<bool> seen(logits.size(), false);
    auto penalize = [&](int32_t t) {
      if (seen[size_t(t)]) return;
      seen[size_t(t)] = true;
      float& l = logits[size_t(t)];
      l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    };
    for (int32_t t : prompt) penalize(t);
    for (int32_t t : generated) penalize(t);
  }
  if (params_.presence_penalty != 0.f || params_.frequency_penalty != 0.f) {  // OpenAI: output only
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : generated) counts[t]++;
    for (auto [t, n] : counts)
      logits[size_t(t)] -= params_.presence_penalty + params_.frequency_penalty * float(n);
  }
}

int32_t Sampler::draw(std::span<const float> logits) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  size_t keep = idx.size();
  if (params_.top_k > 0) keep = std::min(keep, size_t(params_.top_k));
  std::vector<double> probs(keep);
  float max = logits[size_t(idx[0])];
  double sum = 0;
  for (size_t i = 0; i < keep; i++) {
    float l = logits[size_t(idx[i])];
    probs[i] = l == neg_inf ? 0.0 : std::exp(double(l - max) / params_.temperature);
    sum += probs[i];
  }
  for (auto& p : probs) p /= sum;
  if (params_.top_p < 1.f) {  // smallest prefix whose mass reaches top_p (at least one)
    double cum = 0;
    size_t n = 0;
    while (n < keep && (n == 0 || cum < params_.top_p)) cum += probs[n++];
    keep = n;
  }
  if (params_.min_p > 0.f) {
    double floor = probs[0] * params_.min_p;
    size_t n = 1;
    while (n < keep && probs[n] >= floor) n++;
    keep = n;
  }
  double total = 0;
  for (size_t i = 0; i < keep; i++) total += probs[i];
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (size_t i = 0; i < keep; i++) {
    u -= probs[i];
    if (u < 0) return idx[i];
  }
  return idx[keep - 1];
}

GeneratedToken Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt,
                               std::span<const int32_t> generated, int top_logprobs) {
  GeneratedToken out;
  std::vector<float> raw;
  if (top_logprobs >= 0) raw.assign(logits.begin(), logits.end());
  apply_penalties(logits, prompt, generated);
  if (params_.greedy()) {
    out.token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    out.token = draw(logits);
  }
  if (top_logprobs >= 0) out.logprob = token_logprob(raw, out.token, top_logprobs, &out.top_logprobs);
  return out;
}

}  // namespace tandem
