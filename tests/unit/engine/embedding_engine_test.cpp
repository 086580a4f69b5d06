// Embedding requests through the engine (engine/pooling.h): pooled vectors of the final
// hidden states, whatever runs beside them — chunked prefill, generation rows, the prefix
// cache, preemption. The references are computed through other requests: position t's
// hidden state is the `last` pooling of the prompt's first t + 1 tokens (causal
// attention), so `mean` must be their average and `cls` the first one. (That `last` is the
// hidden state the LM head multiplies is tests/golden/embedding_oracle_test.cpp's check.)
#include <gtest/gtest.h>

#include <array>

#include "engine_test_util.h"

namespace tandem {
namespace embedding_engine_test {

using test::prompt_of;

GenerationRequest embedding(std::vector<int32_t> prompt, Pooling pooling) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 0;
  r.pooling = pooling;
  return r;
}

struct Embedded {
  std::vector<float> vector;
  std::optional<FinishReason> finish;
  std::string error;
  int prompt_tokens = 0, cached_tokens = 0, num_tokens = 0;
};

Embedded read_embedding(RequestStream& s) {
  Embedded out;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    out.num_tokens += int(c->tokens.size());
    if (!c->embedding.empty()) out.vector = c->embedding;
    if (c->finish) {
      out.finish = c->finish;
      out.error = c->error;
      out.prompt_tokens = c->prompt_tokens;
      out.cached_tokens = c->cached_tokens;
    }
  }
  return out;
}

std::vector<float> embed_alone(const char* arch, const std::vector<int32_t>& prompt, Pooling p) {
  auto engine = test::cpu_engine(arch, {});
  auto s = engine->submit(embedding(prompt, p));
  engine->run_until_idle();
  return read_embedding(*s).vector;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return test::relative_error(a.data(), b.data(), int64_t(std::min(a.size(), b.size())));
}

TEST(EmbeddingEngine, LastPoolingIsOneHiddenStateOfTheModelsWidth) {
  auto engine = test::cpu_engine("llama", {});
  auto s = engine->submit(embedding(prompt_of(21, 1), Pooling::Last));
  engine->run_until_idle();
  Embedded got = read_embedding(*s);
  EXPECT_EQ(got.finish, FinishReason::Length);
  EXPECT_EQ(got.num_tokens, 0);
  EXPECT_EQ(got.prompt_tokens, 21);
  ASSERT_EQ(int(got.vector.size()), engine->model_info().hidden_size);
  double norm = 0;
  for (float v : got.vector) norm += double(v) * v;
  EXPECT_GT(norm, 0.0);  // not normalized by the engine, and not zeros
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

// Position t's hidden state, t < n: the last pooling of the first t + 1 tokens.
std::vector<std::vector<float>> hidden_states(const char* arch,
                                              const std::vector<int32_t>& prompt) {
  auto engine = test::cpu_engine(arch, {});
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t t = 0; t < prompt.size(); t++)
    streams.push_back(engine->submit(embedding(
        std::vector<int32_t>(prompt.begin(), prompt.begin() + long(t) + 1), Pooling::Last)));
  engine->run_until_idle();
  std::vector<std::vector<float>> out;
  for (auto& s : streams) out.push_back(read_embedding(*s).vector);
  return out;
}

TEST(EmbeddingEngine, MeanIsTheAverageOfEveryPositionsHiddenStateAndClsTheFirst) {
  for (const char* arch : {"llama", "gemma3n"}) {
    SCOPED_TRACE(arch);
    const std::vector<int32_t> prompt = prompt_of(37, 2);
    const std::vector<std::vector<float>> h = hidden_states(arch, prompt);
    std::vector<float> mean(h[0].size(), 0.f);
    for (size_t d = 0; d < mean.size(); d++) {
      double sum = 0;
      for (const auto& v : h) sum += v[d];
      mean[d] = float(sum / double(h.size()));
    }
    EXPECT_LE(rel(embed_alone(arch, prompt, Pooling::Mean), mean), 1e-5);
    EXPECT_LE(rel(embed_alone(arch, prompt, Pooling::Cls), h[0]), 1e-6);
  }
}

// Every pooling through chunked prefill (7 tokens a step), beside generating rows and
// other embeddings, equals the request alone; the generating rows are unchanged.
TEST(EmbeddingEngine, BatchedAndChunkedEqualsEachAlone) {
  std::vector<std::pair<std::vector<int32_t>, Pooling>> inputs;
  for (int i = 0; i < 6; i++)
    inputs.push_back({prompt_of(9 + 11 * i, 20 + i),
                      std::array{Pooling::Last, Pooling::Mean, Pooling::Cls}[i % 3]});
  std::vector<std::vector<float>> solo;
  for (auto& [p, pooling] : inputs) solo.push_back(embed_alone("llama", p, pooling));
  auto ref = test::cpu_engine("llama", {});
  auto gen_solo = ref->submit(test::greedy(prompt_of(30, 9), 12));
  ref->run_until_idle();
  const std::vector<int32_t> expected_tokens = test::drain(*gen_solo);

  EngineConfig c;
  c.scheduler.max_rows = 8;
  c.scheduler.max_batched_tokens = 7;
  auto engine = test::cpu_engine("llama", c);
  auto gen = engine->submit(test::greedy(prompt_of(30, 9), 12));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& [p, pooling] : inputs) streams.push_back(engine->submit(embedding(p, pooling)));
  engine->run_until_idle();
  for (size_t i = 0; i < inputs.size(); i++)
    EXPECT_LE(rel(read_embedding(*streams[i]).vector, solo[i]), 1e-5) << "input " << i;
  EXPECT_EQ(test::drain(*gen), expected_tokens);
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

TEST(EmbeddingEngine, ACachedPrefixGivesTheSameVector) {
  const std::vector<int32_t> prompt = prompt_of(70, 3);
  const std::vector<float> last = embed_alone("llama", prompt, Pooling::Last);
  const std::vector<float> mean = embed_alone("llama", prompt, Pooling::Mean);
  auto engine = test::cpu_engine("llama", {});
  auto warm = engine->submit(embedding(prompt, Pooling::Last));
  engine->run_until_idle();
  EXPECT_EQ(read_embedding(*warm).cached_tokens, 0);
  // The whole prompt is cached but the block of its last token: `last` recomputes that
  // block only; `mean` reads every position's hidden state, so it computes them all.
  auto again = engine->submit(embedding(prompt, Pooling::Last));
  engine->run_until_idle();
  Embedded hit = read_embedding(*again);
  EXPECT_EQ(hit.cached_tokens, 64);
  EXPECT_LE(rel(hit.vector, last), 1e-5);
  auto averaged = engine->submit(embedding(prompt, Pooling::Mean));
  engine->run_until_idle();
  Embedded whole = read_embedding(*averaged);
  EXPECT_EQ(whole.cached_tokens, 0);
  EXPECT_LE(rel(whole.vector, mean), 1e-5);
}

// Preempted mid-prompt and recomputed (from its own cached blocks), a mean-pooled request
// still pools every position exactly once.
TEST(EmbeddingEngine, PreemptedRequestsPoolEveryPositionOnce) {
  EngineConfig tight;
  tight.scheduler.max_rows = 4;
  tight.scheduler.max_batched_tokens = 24;
  tight.kv_budget_bytes = 9 * test::kv_block_bytes("llama", DType::F32) - 1;
  auto engine = test::cpu_engine("llama", tight);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<RequestStream>> gens, embeds;
  for (int i = 0; i < 3; i++) {
    prompts.push_back(prompt_of(40 + i, 30 + i));
    gens.push_back(engine->submit(test::greedy(prompt_of(20, 40 + i), 30)));
    embeds.push_back(engine->submit(embedding(prompts.back(), Pooling::Mean)));
  }
  engine->run_until_idle();
  EXPECT_GT(engine->stats().num_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); i++) {
    Embedded got = read_embedding(*embeds[i]);
    ASSERT_EQ(got.finish, FinishReason::Length) << got.error;
    EXPECT_LE(rel(got.vector, embed_alone("llama", prompts[i], Pooling::Mean)), 1e-5) << i;
  }
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

TEST(EmbeddingEngine, RequestsThatCannotBeEmbeddingsAreRefused) {
  auto engine = test::cpu_engine("llama", {});
  auto refusal = [&](GenerationRequest r) {
    auto s = engine->submit(std::move(r));
    auto c = s->pop(std::chrono::milliseconds(0));
    return c && c->finish == FinishReason::Error ? c->error : std::string();
  };
  GenerationRequest generating = embedding(prompt_of(5, 1), Pooling::Mean);
  generating.max_tokens = 3;
  EXPECT_NE(refusal(generating).find("max_tokens must be 0"), std::string::npos);
  GenerationRequest scored = embedding(prompt_of(5, 1), Pooling::Last);
  scored.prompt_logprobs = PromptLogprobs{};
  EXPECT_NE(refusal(scored).find("prompt logprobs"), std::string::npos);
  EXPECT_NE(refusal(embedding({}, Pooling::Last)).find("empty"), std::string::npos);
  EXPECT_NE(refusal(embedding({1, 999999}, Pooling::Last)).find("outside the vocabulary"),
            std::string::npos);
  const int too_long = engine->model_info().max_model_len + 1;
  EXPECT_NE(refusal(embedding(std::vector<int32_t>(size_t(too_long), 5), Pooling::Last))
                .find("exceeds the context length"),
            std::string::npos);
  EXPECT_EQ(refusal(embedding(prompt_of(5, 1), Pooling::Cls)), "");
}

TEST(EmbeddingEngine, ACancelledEmbeddingFreesItsBlocks) {
  auto engine = test::cpu_engine("llama", {});
  auto s = engine->submit(embedding(prompt_of(50, 4), Pooling::Mean));
  s->cancel();
  engine->run_until_idle();
  Embedded got = read_embedding(*s);
  EXPECT_EQ(got.finish, FinishReason::Cancelled);
  EXPECT_TRUE(got.vector.empty());
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

}  // namespace embedding_engine_test
}  // namespace tandem
