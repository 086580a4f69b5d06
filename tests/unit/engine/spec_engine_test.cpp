// Speculative decoding in the engine (issue 44; engine/speculator.h): rows that verify
// proposals emit exactly what they emit without speculation — greedy token for token, and
// seeded sampled rows with n-gram proposals bit for bit (the target's own draws decide) —
// with stops, length limits, min_tokens, penalties, logprobs, preemption, chunked prompts
// and the overlapped loop in play; rejected proposals leave no K/V behind (every block free
// at the end, and a prefix-cache hit on a speculating row's blocks gives the same output).
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace tandem {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  std::optional<FinishReason> finish;
  int completion_tokens = -1;
};

Outcome collect(RequestStream& s) {
  Outcome o;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) {
      o.tokens.push_back(t.token);
      o.logprobs.push_back(t.logprob);
      o.top.push_back(t.top_logprobs);
    }
    if (c->finish) {
      o.finish = c->finish;
      o.completion_tokens = c->completion_tokens;
    }
  }
  return o;
}

// A prompt that repeats a phrase, so the n-gram proposer finds what follows.
std::vector<int32_t> repetitive_prompt(int salt, int len = 40) {
  std::vector<int32_t> phrase;
  for (int i = 0; i < 7; i++) phrase.push_back(int32_t((i * 53 + salt * 31) % 480 + 10));
  std::vector<int32_t> p;
  for (int i = 0; i < len; i++) p.push_back(phrase[size_t(i) % phrase.size()]);
  return p;
}

SpeculativeConfig ngram(int k, bool adaptive = false) {
  SpeculativeConfig c;
  c.method = SpecMethod::Ngram;
  c.num_speculative_tokens = k;
  c.prompt_lookup_min = 1;
  c.prompt_lookup_max = 3;
  c.adaptive = adaptive;
  return c;
}

struct Result {
  std::vector<Outcome> out;
  EngineStats stats;
};

Result run(const char* arch, EngineConfig config, const std::vector<GenerationRequest>& reqs) {
  auto engine = test::cpu_engine(arch, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r));
  engine->run_until_idle();
  EXPECT_EQ(engine->kv_blocks().num_used(), 0) << "KV blocks left behind";
  Result result;
  for (auto& s : streams) result.out.push_back(collect(*s));
  result.stats = engine->stats();
  return result;
}

EngineConfig config(int rows, std::optional<SpeculativeConfig> spec, Overlap overlap = Overlap::Off) {
  EngineConfig c;
  c.scheduler.max_rows = rows;
  c.overlap = overlap;
  c.speculative = std::move(spec);
  return c;
}

void expect_same(const std::vector<Outcome>& want, const std::vector<Outcome>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); i++) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(want[i].tokens, got[i].tokens);
    EXPECT_EQ(want[i].finish, got[i].finish);
    EXPECT_EQ(want[i].completion_tokens, got[i].completion_tokens);
    ASSERT_EQ(want[i].logprobs.size(), got[i].logprobs.size());
    for (size_t t = 0; t < want[i].logprobs.size(); t++) {
      EXPECT_NEAR(want[i].logprobs[t], got[i].logprobs[t], 1e-4) << "token " << t;
      ASSERT_EQ(want[i].top[t].size(), got[i].top[t].size()) << "token " << t;
      for (size_t k = 0; k < want[i].top[t].size(); k++)
        EXPECT_EQ(want[i].top[t][k].token, got[i].top[t][k].token) << "token " << t;
    }
  }
}

std::vector<GenerationRequest> greedy_requests(int n, int max_tokens) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; i++) reqs.push_back(test::greedy(repetitive_prompt(i, 20 + 5 * i), max_tokens));
  return reqs;
}

TEST(SpecEngine, NgramGreedyEmitsWhatThePlainEngineEmits) {
  const auto reqs = greedy_requests(6, 40);
  for (int rows : {1, 4}) {
    SCOPED_TRACE("max_rows " + std::to_string(rows));
    Result plain = run("llama", config(rows, std::nullopt), reqs);
    Result spec = run("llama", config(rows, ngram(4)), reqs);
    expect_same(plain.out, spec.out);
    const SpecDecodeStats& s = spec.stats.spec_decode;
    std::printf("[ measured ] n-gram K=4, %d rows: %lld drafts, %lld of %lld proposals accepted\n", rows,
                (long long)s.num_drafts, (long long)s.num_accepted_tokens, (long long)s.num_draft_tokens);
    EXPECT_TRUE(s.enabled);
    EXPECT_GT(s.num_drafts, 0);
    EXPECT_GT(s.num_accepted_tokens, 0) << "no proposal was ever accepted: the test proves little";
    EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);
    EXPECT_EQ(spec.stats.generation_tokens_total, plain.stats.generation_tokens_total);
  }
}

// Seeded sampled rows (temperature, top-k/top-p/min-p, logprobs): with n-gram proposals
// every position is the target's own draw, so the tokens are the plain engine's, bit for
// bit; the stops, lengths and penalties of the mix cut accepted runs short.
std::vector<GenerationRequest> mixed_requests() {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; i++) {
    GenerationRequest r = test::greedy(repetitive_prompt(i, 18 + 3 * i), 30);
    r.sampling.temperature = i % 2 ? 0.7f : 0.f;
    r.sampling.seed = uint64_t(1000 + i);
    if (i == 1) r.sampling.top_p = 0.9f;
    if (i == 3) r.sampling.top_k = 5;
    if (i == 5) r.sampling.min_p = 0.05f;
    r.top_logprobs = i % 3 == 0 ? 3 : -1;
    reqs.push_back(r);
  }
  reqs[2].max_tokens = 3;  // ends inside a run of accepted proposals
  reqs[4].sampling.repetition_penalty = 1.2f;  // penalties count the proposals before each position
  reqs[4].sampling.frequency_penalty = 0.3f;
  reqs[6].sampling.presence_penalty = 0.5f;
  return reqs;
}

TEST(SpecEngine, NgramSeededSamplingIsBitIdentical) {
  const auto reqs = mixed_requests();
  Result plain = run("llama", config(4, std::nullopt), reqs);
  Result spec = run("llama", config(4, ngram(5)), reqs);
  expect_same(plain.out, spec.out);
  EXPECT_GT(spec.stats.spec_decode.num_accepted_tokens, 0);
  EXPECT_EQ(spec.out[2].tokens.size(), 3u);
}

// A stop token, found by the plain run, ends the speculating row at the same place: the
// proposals after it are not emitted, nor its own if min_tokens says not yet.
TEST(SpecEngine, StopTokensEndAcceptedRuns) {
  Result plain = run("llama", config(2, std::nullopt), greedy_requests(2, 30));
  for (int at : {5, 10, 20}) {
    std::vector<GenerationRequest> reqs = greedy_requests(2, 30);
    for (size_t i = 0; i < reqs.size(); i++) reqs[i].stop_token_ids = {plain.out[i].tokens[size_t(at)]};
    reqs[1].min_tokens = at + 2;
    Result want = run("llama", config(2, std::nullopt), reqs);
    Result got = run("llama", config(2, ngram(4)), reqs);
    expect_same(want.out, got.out);
    EXPECT_EQ(got.out[0].finish, FinishReason::Stop);
    EXPECT_LE(got.out[0].tokens.size(), size_t(at + 1));
  }
}

TEST(SpecEngine, PreemptionAndChunkedPromptsUnderKvPressure) {
  EngineConfig tight = config(4, ngram(4));
  tight.kv_budget_bytes = 12 * test::kv_block_bytes("llama", DType::F32);
  tight.scheduler.max_batched_tokens = 16;
  EngineConfig plain_tight = tight;
  plain_tight.speculative.reset();
  const auto reqs = greedy_requests(4, 40);
  Result want = run("llama", plain_tight, reqs);
  Result got = run("llama", tight, reqs);
  expect_same(want.out, got.out);
  EXPECT_GT(got.stats.num_preemptions, 0);
  EXPECT_GT(got.stats.spec_decode.num_accepted_tokens, 0);
}

TEST(SpecEngine, OverlappedLoopReadsSpeculatingStepsBeforePlanning) {
  const auto reqs = mixed_requests();
  Result serial = run("llama", config(3, std::nullopt), reqs);
  Result overlapped = run("llama", config(3, ngram(3), Overlap::On), reqs);
  expect_same(serial.out, overlapped.out);
  EXPECT_GT(overlapped.stats.spec_decode.num_accepted_tokens, 0);
}

// Rejected proposals' K/V is never cached: the same requests again, served from the
// prefix cache the speculating rows filled, give the same tokens.
TEST(SpecEngine, PrefixCacheHoldsOnlyFinalTokens) {
  auto engine = test::cpu_engine("llama", config(4, ngram(4)));
  const auto reqs = greedy_requests(3, 40);
  std::vector<std::vector<int32_t>> first, again;
  for (int round = 0; round < 2; round++) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) {
      GenerationRequest longer = r;
      if (round == 1) {  // the prompt now runs into what the first round generated
        longer.prompt.insert(longer.prompt.end(), first[streams.size()].begin(), first[streams.size()].end() - 8);
        longer.max_tokens = 8;
      }
      streams.push_back(engine->submit(longer));
    }
    engine->run_until_idle();
    for (auto& s : streams) (round == 0 ? first : again).push_back(collect(*s).tokens);
  }
  EXPECT_GT(engine->stats().prefix_cache_hits_total, 0);
  for (size_t i = 0; i < reqs.size(); i++)
    EXPECT_EQ(again[i], std::vector<int32_t>(first[i].end() - 8, first[i].end())) << "request " << i;
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

TEST(SpecEngine, ARequestCanOptOut) {
  auto reqs = greedy_requests(2, 30);
  for (auto& r : reqs) r.speculative = false;
  Result spec = run("llama", config(2, ngram(4)), reqs);
  EXPECT_EQ(spec.stats.spec_decode.num_drafts, 0);
  Result plain = run("llama", config(2, std::nullopt), reqs);
  expect_same(plain.out, spec.out);
}

}  // namespace
}  // namespace tandem
