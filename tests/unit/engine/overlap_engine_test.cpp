// The overlapped engine loop (engine.h: step n+1 is issued before step n's tokens are
// read) must emit exactly what the serial loop emits: the same tokens, logprobs, finish
// reasons and counts, with stop tokens, length limits, penalties, seeded sampling,
// preemption and chunked prompts in play, and leave no KV block behind. On the CPU the
// overlap is off by default (it would only delay tokens); these tests force it on.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace tandem {
namespace overlap_engine_test {

std::unique_ptr<Engine> make_engine(EngineConfig config) { return test::cpu_engine("llama", config); }

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::optional<FinishReason> finish;
  int completion_tokens = -1;
};

Outcome collect(RequestStream& s) {
  Outcome o;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) {
      o.tokens.push_back(t.token);
      o.logprobs.push_back(t.logprob);
    }
    if (c->finish) {
      o.finish = c->finish;
      o.completion_tokens = c->completion_tokens;
    }
  }
  return o;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; i++) p.push_back((i * 29 + salt * 13) % 480 + 5);
  return p;
}

GenerationRequest greedy(int prompt_len, int salt, int max_tokens) {
  GenerationRequest r;
  r.prompt = prompt_of(prompt_len, salt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

// A mix that exercises every way a row ends or reads its history.
std::vector<GenerationRequest> mixed_requests(int32_t stop_token) {
  std::vector<GenerationRequest> reqs;
  reqs.push_back(greedy(12, 1, 1));   // ends on its first token
  reqs.push_back(greedy(30, 2, 9));
  reqs.push_back(greedy(7, 3, 24));
  GenerationRequest stop = greedy(7, 3, 24);  // same row, but stops on a token it emits
  stop.stop_token_ids = {stop_token};
  reqs.push_back(stop);
  GenerationRequest late = stop;  // ... not before min_tokens
  late.min_tokens = 20;
  reqs.push_back(late);
  GenerationRequest sampled = greedy(18, 4, 15);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.top_p = 0.8f;
  sampled.sampling.seed = 1234;
  sampled.top_logprobs = 3;
  reqs.push_back(sampled);
  GenerationRequest penalized = greedy(10, 5, 12);  // penalties read every earlier token
  penalized.sampling.repetition_penalty = 1.3f;
  penalized.sampling.frequency_penalty = 0.5f;
  reqs.push_back(penalized);
  return reqs;
}

std::vector<Outcome> run(EngineConfig config, const std::vector<GenerationRequest>& reqs) {
  auto engine = make_engine(config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r));
  engine->run_until_idle();
  EXPECT_EQ(engine->kv_blocks().num_used(), 0) << "KV blocks left behind";
  std::vector<Outcome> out;
  for (auto& s : streams) out.push_back(collect(*s));
  return out;
}

void expect_same(const std::vector<Outcome>& a, const std::vector<Outcome>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    // Steps may group rows differently (a penalized row makes the loop wait), and f32
    // GEMMs round differently with the row count: logprobs agree to rounding.
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
    for (size_t j = 0; j < a[i].logprobs.size(); j++)
      EXPECT_NEAR(a[i].logprobs[j], b[i].logprobs[j], 1e-4) << "request " << i << " token " << j;
    EXPECT_EQ(a[i].finish, b[i].finish) << "request " << i;
    EXPECT_EQ(a[i].completion_tokens, b[i].completion_tokens) << "request " << i;
    EXPECT_EQ(int(a[i].tokens.size()), a[i].completion_tokens) << "request " << i;
  }
}

EngineConfig with_overlap(Overlap overlap, int rows) {
  EngineConfig c;
  c.overlap = overlap;
  c.scheduler.max_rows = rows;
  return c;
}

// The 5th token of request 2's greedy output: a stop token that request 3 meets early.
int32_t stop_token_for_mix() {
  auto solo = run(with_overlap(Overlap::Off, 1), {greedy(7, 3, 24)});
  EXPECT_GE(solo[0].tokens.size(), 5u);
  return solo[0].tokens.size() >= 5 ? solo[0].tokens[4] : 0;
}

TEST(OverlapEngine, EmitsWhatTheSerialLoopEmits) {
  const auto reqs = mixed_requests(stop_token_for_mix());
  for (int rows : {1, 3, 8}) {
    SCOPED_TRACE("max_rows " + std::to_string(rows));
    auto serial = run(with_overlap(Overlap::Off, rows), reqs);
    auto overlapped = run(with_overlap(Overlap::On, rows), reqs);
    expect_same(serial, overlapped);
    // The mix does what it claims: an early stop, min_tokens holding it off, a 1-token row.
    EXPECT_EQ(serial[3].finish, FinishReason::Stop);
    EXPECT_LT(serial[3].tokens.size(), serial[2].tokens.size());
    EXPECT_EQ(serial[0].tokens.size(), 1u);
    EXPECT_GE(serial[4].tokens.size(), 20u);
  }
}

TEST(OverlapEngine, PreemptionAndChunkedPromptsKeepOutputs) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 5; i++) reqs.push_back(greedy(18 + 3 * i, i, 28));
  auto serial = run(with_overlap(Overlap::Off, 1), reqs);
  EngineConfig tight = with_overlap(Overlap::On, 5);
  tight.scheduler.max_batched_tokens = 16;  // prompts arrive in chunks
  // 10 blocks of 16 tokens: five rows of ~50 tokens cannot all stay resident.
  tight.kv_budget_bytes = 10 * test::kv_block_bytes("llama", DType::F32) - 1;
  auto engine = make_engine(tight);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r));
  engine->run_until_idle();
  EXPECT_GT(engine->stats().num_preemptions, 0);
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
  std::vector<Outcome> overlapped;
  for (auto& s : streams) overlapped.push_back(collect(*s));
  expect_same(serial, overlapped);
}

TEST(OverlapEngine, CancellationWhileAStepIsInFlightFreesEverything) {
  auto engine = make_engine(with_overlap(Overlap::On, 4));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; i++) streams.push_back(engine->submit(greedy(10 + i, i, 40)));
  for (int i = 0; i < 6; i++) engine->step();
  streams[1]->cancel();
  streams[2]->cancel();
  engine->run_until_idle();
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
  size_t emitted = 0;
  for (int i : {1, 2}) {
    Outcome o = collect(*streams[size_t(i)]);
    EXPECT_EQ(o.finish, FinishReason::Cancelled);
    EXPECT_LT(o.tokens.size(), 40u);
    EXPECT_EQ(int(o.tokens.size()), o.completion_tokens);
    emitted += o.tokens.size();
  }
  for (int i : {0, 3}) {
    Outcome o = collect(*streams[size_t(i)]);
    EXPECT_EQ(o.tokens.size(), 40u);
    emitted += o.tokens.size();
  }
  // Rows dropped after a cancellation are not counted as generated.
  EXPECT_EQ(engine->stats().generation_tokens_total, int64_t(emitted));
}

}  // namespace overlap_engine_test
}  // namespace tandem
