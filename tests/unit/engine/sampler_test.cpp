// Sampler: how a request's parameters become the per-step SampleRow (seed, counter,
// penalty lists), and that rows drawn through the CPU backend's sampling op are
// reproducible per seed. The drawing itself is tested in tests/unit/backend/sample_test.cpp.
#include <gtest/gtest.h>

#include <map>

#include "backend/backend.h"
#include "engine/sampler.h"

namespace tandem {
namespace sampler_test {

std::map<int32_t, int32_t> penalty_map(const SampleRow& r) {
  EXPECT_EQ(r.penalty_tokens.size(), r.output_counts.size());
  std::map<int32_t, int32_t> m;
  for (size_t i = 0; i < r.penalty_tokens.size(); i++) {
    EXPECT_FALSE(m.count(r.penalty_tokens[i])) << "token listed twice";
    m[r.penalty_tokens[i]] = r.output_counts[i];
  }
  return m;
}

TEST(Sampler, TheRequestSeedWinsOverTheFallback) {
  SamplingParams p;
  EXPECT_EQ(Sampler(p, 7).seed(), 7u);
  p.seed = 42;
  EXPECT_EQ(Sampler(p, 7).seed(), 42u);
  EXPECT_EQ(Sampler(p, 7).row(std::vector<int32_t>{1, 2}, 2, -1).seed, 42u);
}

TEST(Sampler, RowCarriesTheParametersAndCountsGeneratedTokens) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 5;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  std::vector<int32_t> tokens = {5, 6, 7, 8, 9};
  SampleRow r = Sampler(p, 3).row(tokens, 3, 2);
  EXPECT_FLOAT_EQ(r.temperature, 0.7f);
  EXPECT_EQ(r.top_k, 5);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.min_p, 0.05f);
  EXPECT_EQ(r.counter, 2u);  // two tokens generated so far
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.penalty_tokens.empty());  // no penalty on: no lists
  p.temperature = 0.f;
  EXPECT_EQ(Sampler(p, 3).row(tokens, 5, -1).temperature, 0.f);
  EXPECT_EQ(Sampler(p, 3).row(tokens, 5, -1).counter, 0u);
}

TEST(Sampler, PenaltyListsAreDistinctTokensWithOutputCounts) {
  std::vector<int32_t> tokens = {1, 2, 2, 3, /* output: */ 3, 4, 4};
  SamplingParams rep;
  rep.repetition_penalty = 1.3f;  // over prompt and output
  EXPECT_EQ(penalty_map(Sampler(rep, 0).row(tokens, 4, -1)),
            (std::map<int32_t, int32_t>{{1, 0}, {2, 0}, {3, 1}, {4, 2}}));
  SamplingParams freq;
  freq.frequency_penalty = 0.5f;  // over the output only
  EXPECT_EQ(penalty_map(Sampler(freq, 0).row(tokens, 4, -1)),
            (std::map<int32_t, int32_t>{{3, 1}, {4, 2}}));
}

// Tokens drawn by growing a sequence one sampled token at a time.
std::vector<int32_t> generate(Backend& be, const Sampler& s, int n) {
  std::vector<float> logits(40);
  for (size_t i = 0; i < logits.size(); i++) logits[i] = float(i % 7) * 0.3f;
  std::vector<int32_t> tokens = {0, 1};
  for (int i = 0; i < n; i++) {
    Tensor t = be.upload(Tensor::borrow(logits.data(), DType::F32, {1, 40}), DType::F32);
    SampleRow row = s.row(tokens, 2, -1);
    SampledToken out;
    be.sample(t, std::span<const SampleRow>(&row, 1), std::span<SampledToken>(&out, 1));
    tokens.push_back(out.token);
  }
  return std::vector<int32_t>(tokens.begin() + 2, tokens.end());
}

TEST(Sampler, SameSeedSameTokensThroughTheBackend) {
  auto be = make_cpu_backend();
  SamplingParams p;
  p.temperature = 1.f;
  p.frequency_penalty = 0.3f;
  p.seed = 42;
  std::vector<int32_t> a = generate(*be, Sampler(p, 1), 20);
  EXPECT_EQ(a, generate(*be, Sampler(p, 999), 20));  // the fallback is not used
  p.seed = 43;
  EXPECT_NE(a, generate(*be, Sampler(p, 1), 20));
}

TEST(Sampler, ToGeneratedKeepsLogprobs) {
  SampledToken t;
  t.token = 4;
  t.logprob = -0.5f;
  t.top_tokens = {4, 2};
  t.top_logprobs = {-0.5f, -1.5f};
  GeneratedToken g = to_generated(t);
  EXPECT_EQ(g.token, 4);
  EXPECT_FLOAT_EQ(g.logprob, -0.5f);
  ASSERT_EQ(g.top_logprobs.size(), 2u);
  EXPECT_EQ(g.top_logprobs[1].token, 2);
  EXPECT_FLOAT_EQ(g.top_logprobs[1].logprob, -1.5f);
}

}  // namespace sampler_test
}  // namespace tandem
