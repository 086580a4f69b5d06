#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/sampler.h"

namespace tandem {
namespace {

GeneratedToken sample_once(SamplingParams p, std::vector<float> logits, uint64_t seed = 1,
                           std::vector<int32_t> generated = {}) {
  Sampler s(p, seed);
  return s.sample(logits, {}, generated, 2);
}

TEST(Sampler, GreedyPicksTheArgmax) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(sample_once(p, {0.1f, 3.f, -1.f, 2.9f}).token, 1);
}

TEST(Sampler, LogprobsAreTheRawDistribution) {
  SamplingParams p;
  p.temperature = 0;
  auto t = sample_once(p, {0.f, std::log(3.f)});
  EXPECT_NEAR(t.logprob, std::log(0.75), 1e-6);
  ASSERT_EQ(t.top_logprobs.size(), 2u);
  EXPECT_EQ(t.top_logprobs[0].token, 1);
  EXPECT_NEAR(t.top_logprobs[1].logprob, std::log(0.25), 1e-6);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); i++) logits[i] = float(i % 7) * 0.3f;
  Sampler a(p, 1), b(p, 999);  // the request's seed wins over the fallback
  for (int i = 0; i < 20; i++) {
    auto la = logits, lb = logits;
    EXPECT_EQ(a.sample(la, {}, {}, -1).token, b.sample(lb, {}, {}, -1).token);
  }
}

TEST(Sampler, TopKAndTopPRestrictTheChoice) {
  std::vector<float> logits = {5.f, 4.f, 0.f, 0.f, 0.f};
  SamplingParams k;
  k.top_k = 2;
  SamplingParams tp;
  tp.top_p = 0.5f;  // token 0 alone holds ~73% of the mass
  for (uint64_t seed = 0; seed < 200; seed++) {
    EXPECT_LT(sample_once(k, logits, seed).token, 2);
    EXPECT_EQ(sample_once(tp, logits, seed).token, 0);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.5f;
  for (uint64_t seed = 0; seed < 200; seed++)
    EXPECT_EQ(sample_once(p, {3.f, 0.f, 0.f}, seed).token, 0);
}

TEST(Sampler, TemperatureSamplesFollowTheDistribution) {
  SamplingParams p;
  std::map<int, int> counts;
  for (uint64_t seed = 0; seed < 4000; seed++) counts[sample_once(p, {0.f, std::log(3.f)}, seed).token]++;
  EXPECT_NEAR(counts[1] / 4000.0, 0.75, 0.03);
}

TEST(Sampler, PenaltiesLowerRepeatedTokens) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 2.f;
  EXPECT_EQ(sample_once(p, {3.f, 2.f}, 1, {0}).token, 1);  // 3 - 2 < 2
  SamplingParams r;
  r.temperature = 0;
  r.repetition_penalty = 2.f;
  EXPECT_EQ(sample_once(r, {3.f, 2.f}, 1, {0}).token, 1);  // 3 / 2 < 2
}

}  // namespace
}  // namespace tandem
