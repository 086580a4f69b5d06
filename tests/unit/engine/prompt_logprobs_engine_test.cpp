// GenerationRequest::prompt_logprobs: the prompt's own log-probabilities out of the
// engine's prefill, checked against log-softmax of teacher-forced logits of the same
// model, through chunked prefill, batching, the prefix cache and preemption.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/teacher_forcing.h"
#include "engine_test_util.h"

namespace tandem {
namespace prompt_logprobs_engine_test {

using test::prompt_of;

// ln softmax(logits[row])[token] in f64.
double log_softmax(const Tensor& logits, int64_t row, int32_t token) {
  const float* r = logits.ptr<float>() + row * logits.cols();
  double max = *std::max_element(r, r + logits.cols()), sum = 0;
  for (int64_t i = 0; i < logits.cols(); i++) sum += std::exp(double(r[i]) - max);
  return double(r[token]) - max - std::log(sum);
}

// The reference: position p's logprob from teacher-forced logits of the whole prompt.
std::vector<double> reference_logprobs(const std::vector<int32_t>& prompt) {
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model("llama"), *backend);
  Tensor logits = teacher_forced_logits(*model, *backend, prompt, 0);
  std::vector<double> out(prompt.size(), 0.0);
  for (size_t p = 1; p < prompt.size(); p++) out[p] = log_softmax(logits, int64_t(p - 1), prompt[p]);
  return out;
}

GenerationRequest scoring(std::vector<int32_t> prompt, int first, int top, int max_tokens = 0) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.prompt_logprobs = PromptLogprobs{.first = first, .top = top};
  return r;
}

struct Scored {
  std::vector<GeneratedToken> prompt_logprobs;
  std::vector<int32_t> generated;
  std::optional<FinishReason> finish;
  int completion_tokens = 0, cached_tokens = 0;
  int chunks_with_logprobs = 0;
};

Scored read_all(RequestStream& s) {
  Scored out;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    if (!c->prompt_logprobs.empty()) {
      out.prompt_logprobs = c->prompt_logprobs;
      out.chunks_with_logprobs++;
    }
    for (const GeneratedToken& t : c->tokens) out.generated.push_back(t.token);
    if (c->finish) {
      out.finish = c->finish;
      out.completion_tokens = c->completion_tokens;
      out.cached_tokens = c->cached_tokens;
    }
  }
  return out;
}

void expect_matches(const Scored& got, const std::vector<int32_t>& prompt, int first,
                    const std::vector<double>& reference) {
  ASSERT_EQ(got.prompt_logprobs.size(), prompt.size() - size_t(first));
  for (size_t i = 0; i < got.prompt_logprobs.size(); i++) {
    const size_t p = size_t(first) + i;
    EXPECT_EQ(got.prompt_logprobs[i].token, prompt[p]);
    EXPECT_NEAR(got.prompt_logprobs[i].logprob, reference[p], 2e-5) << "position " << p;
  }
}

TEST(PromptLogprobs, ScoreOnlyRequestsMatchTeacherForcingAndGenerateNothing) {
  const std::vector<int32_t> prompt = prompt_of(40, 1);
  const std::vector<double> ref = reference_logprobs(prompt);
  for (int step_tokens : {2048, 16, 7}) {  // whole, and chunked prefill
    EngineConfig c;
    c.scheduler.max_batched_tokens = step_tokens;
    auto engine = test::cpu_engine("llama", c);
    auto s = engine->submit(scoring(prompt, 1, 3));
    engine->run_until_idle();
    Scored got = read_all(*s);
    SCOPED_TRACE(step_tokens);
    expect_matches(got, prompt, 1, ref);
    EXPECT_EQ(got.finish, FinishReason::Length);
    EXPECT_TRUE(got.generated.empty());
    EXPECT_EQ(got.completion_tokens, 0);
    EXPECT_EQ(got.chunks_with_logprobs, 1);
    EXPECT_EQ(engine->kv_blocks().num_used(), 0);
    // The top alternatives are sorted, and hold the token itself when it is the best.
    for (const GeneratedToken& t : got.prompt_logprobs) {
      ASSERT_EQ(t.top_logprobs.size(), 3u);
      EXPECT_GE(t.top_logprobs[0].logprob, t.top_logprobs[1].logprob);
      EXPECT_GE(t.top_logprobs[0].logprob, t.logprob - 1e-6f);
    }
  }
}

TEST(PromptLogprobs, OnlyThePositionsAskedForAreScored) {
  const std::vector<int32_t> prompt = prompt_of(30, 2);
  const std::vector<double> ref = reference_logprobs(prompt);
  auto engine = test::cpu_engine("llama", {});
  auto tail = engine->submit(scoring(prompt, 25, 0));
  auto none = engine->submit(scoring(prompt, 30, 0));
  engine->run_until_idle();
  Scored got = read_all(*tail);
  expect_matches(got, prompt, 25, ref);
  EXPECT_TRUE(got.prompt_logprobs[0].top_logprobs.empty());
  Scored empty = read_all(*none);
  EXPECT_TRUE(empty.prompt_logprobs.empty());
  EXPECT_EQ(empty.finish, FinishReason::Length);
}

TEST(PromptLogprobs, ACachedPrefixStopsShortOfTheScoredPositions) {
  const std::vector<int32_t> prompt = prompt_of(64, 3);
  const std::vector<double> ref = reference_logprobs(prompt);
  auto engine = test::cpu_engine("llama", {});
  auto warm = engine->submit(test::greedy(prompt, 2));
  engine->run_until_idle();
  read_all(*warm);
  // The whole prompt is cached (but its last token); scoring from 40 recomputes from 32.
  auto s = engine->submit(scoring(prompt, 40, 0));
  auto all = engine->submit(scoring(prompt, 1, 0));
  engine->run_until_idle();
  Scored got = read_all(*s);
  expect_matches(got, prompt, 40, ref);
  EXPECT_EQ(got.cached_tokens, 32);
  Scored whole = read_all(*all);
  expect_matches(whole, prompt, 1, ref);
  EXPECT_EQ(whole.cached_tokens, 0);
}

TEST(PromptLogprobs, AGeneratingRequestCarriesThemOnItsFirstToken) {
  const std::vector<int32_t> prompt = prompt_of(20, 4);
  const std::vector<double> ref = reference_logprobs(prompt);
  auto engine = test::cpu_engine("llama", {});
  auto plain = engine->submit(test::greedy(prompt, 6));
  auto scored = engine->submit(scoring(prompt, 1, 1, 6));
  engine->run_until_idle();
  Scored got = read_all(*scored);
  expect_matches(got, prompt, 1, ref);
  EXPECT_EQ(got.generated, test::drain(*plain));
  EXPECT_EQ(got.chunks_with_logprobs, 1);
}

TEST(PromptLogprobs, BatchedAndPreemptedRowsAreScoredOnce) {
  EngineConfig tight;
  tight.scheduler.max_rows = 4;
  tight.scheduler.max_batched_tokens = 24;
  tight.kv_budget_bytes = 9 * test::kv_block_bytes("llama", DType::F32) - 1;
  auto engine = test::cpu_engine("llama", tight);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; i++) {
    prompts.push_back(prompt_of(40 + i, 10 + i));
    streams.push_back(engine->submit(scoring(prompts.back(), 1, 0, 30)));
  }
  engine->run_until_idle();
  EXPECT_GT(engine->stats().num_preemptions, 0);
  for (int i = 0; i < 4; i++) {
    SCOPED_TRACE(i);
    Scored got = read_all(*streams[size_t(i)]);
    expect_matches(got, prompts[size_t(i)], 1, reference_logprobs(prompts[size_t(i)]));
    EXPECT_EQ(got.generated.size(), 30u);
  }
}

TEST(PromptLogprobs, BadRequestsAreRefused) {
  auto engine = test::cpu_engine("llama", {});
  auto refused = [&](GenerationRequest r) {
    auto s = engine->submit(std::move(r));
    auto c = s->pop(std::chrono::milliseconds(0));
    return c && c->finish == FinishReason::Error;
  };
  EXPECT_TRUE(refused(scoring(prompt_of(10, 5), 0, 0)));   // position 0 has none
  EXPECT_TRUE(refused(scoring(prompt_of(10, 5), 11, 0)));  // past the prompt
  EXPECT_TRUE(refused(scoring(prompt_of(10, 5), 1, 21)));  // too many alternatives
  GenerationRequest nothing = test::greedy(prompt_of(10, 5), 0);
  EXPECT_TRUE(refused(nothing));  // max_tokens 0 without prompt logprobs
  EXPECT_FALSE(refused(scoring(prompt_of(10, 5), 10, 20)));
}

}  // namespace prompt_logprobs_engine_test
}  // namespace tandem
