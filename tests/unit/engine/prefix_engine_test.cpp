// The engine with the prefix cache, on oracle models of every KV layout (llama: full
// attention; mistral: every layer slides; gemma2: full + sliding; gemma3n: KV-sharing):
// a request sharing a prefix with an earlier one starts from cached blocks and emits what
// it emits with caching off; a chat's next turn finds its history; the counters add up,
// and an idle engine holds no block.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace tandem {
namespace prefix_engine_test {

using test::drain;
using test::greedy;
using test::prompt_of;

constexpr const char* kArchs[] = {"llama", "mistral", "gemma2", "gemma3n"};

struct Outcome {
  std::vector<int32_t> tokens;
  int cached_tokens = 0;
};

Outcome run_one(Engine& engine, GenerationRequest r) {
  auto s = engine.submit(std::move(r));
  engine.run_until_idle();
  Outcome out;
  while (auto c = s->pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) out.tokens.push_back(t.token);
    if (c->finish) out.cached_tokens = c->cached_tokens;
  }
  return out;
}

std::vector<int32_t> with_suffix(std::vector<int32_t> prefix, int n, int salt) {
  std::vector<int32_t> tail = prompt_of(n, salt);
  prefix.insert(prefix.end(), tail.begin(), tail.end());
  return prefix;
}

TEST(PrefixEngine, ASharedPrefixIsReusedAndChangesNoToken) {
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    const std::vector<int32_t> shared = prompt_of(120, 3);
    auto off = test::cpu_engine(arch, {.enable_prefix_caching = false});
    auto on = test::cpu_engine(arch, {});
    Outcome first = run_one(*on, greedy(with_suffix(shared, 9, 1), 12));
    EXPECT_EQ(first.cached_tokens, 0);
    const GenerationRequest second = greedy(with_suffix(shared, 14, 2), 20);
    const Outcome want = run_one(*off, second);
    const Outcome got = run_one(*on, second);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(want.cached_tokens, 0);
    EXPECT_EQ(got.cached_tokens, 112);  // every full block of the 120 shared tokens
    const EngineStats st = on->stats();
    EXPECT_TRUE(st.prefix_cache_enabled);
    EXPECT_EQ(st.prefix_cache_queries_total, 129 + 134);
    EXPECT_EQ(st.prefix_cache_hits_total, 112);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_GT(st.kv_blocks_cached, 0);
    EXPECT_EQ(on->kv_blocks().num_used(), 0);
    EXPECT_EQ(off->stats().kv_blocks_cached, 0);
  }
}

// Turn k + 1 resends turn k's prompt and output, plus a new user turn: all but the last
// partial block of the history is found (on window layers too: their last window is kept).
TEST(PrefixEngine, AChatsNextTurnFindsItsHistory) {
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    auto on = test::cpu_engine(arch, {});
    auto off = test::cpu_engine(arch, {.enable_prefix_caching = false});
    std::vector<int32_t> history = prompt_of(40, 5);
    for (int turn = 0; turn < 3; turn++) {
      const GenerationRequest r = greedy(history, 20);
      const Outcome got = run_one(*on, r);
      EXPECT_EQ(got.tokens, run_one(*off, r).tokens) << "turn " << turn;
      if (turn > 0) {
        EXPECT_GE(got.cached_tokens, int(history.size()) - 12 - 16) << "turn " << turn;
      }
      history.insert(history.end(), got.tokens.begin(), got.tokens.end());
      history = with_suffix(history, 12, turn);
    }
    EXPECT_EQ(on->kv_blocks().num_used(), 0);
  }
}

TEST(PrefixEngine, ConcurrentSharersChunkedAndPreemptedEmitWhatCachingOffEmits) {
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    EngineConfig tight;
    tight.scheduler.max_rows = 4;
    tight.scheduler.max_batched_tokens = 16;
    // The smallest budget that holds one request of 96 tokens either way (a window group
    // takes its share first, more with the held window): the six must take turns.
    EngineConfig tight_off = tight;
    tight_off.enable_prefix_caching = false;
    for (int blocks = 6; blocks < 64; blocks++) {
      tight.kv_budget_bytes = tight_off.kv_budget_bytes = blocks * test::kv_block_bytes(arch, DType::F32);
      if (test::cpu_engine(arch, tight)->model_info().max_model_len >= 96 &&
          test::cpu_engine(arch, tight_off)->model_info().max_model_len >= 96)
        break;
    }
    const std::vector<int32_t> shared = prompt_of(50, 7);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 6; i++) reqs.push_back(greedy(with_suffix(shared, 3 + i, 10 + i), 16));
    auto run_all = [&](const EngineConfig& c, int64_t* preemptions, int64_t* hits) {
      auto engine = test::cpu_engine(arch, c);
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (const GenerationRequest& r : reqs) streams.push_back(engine->submit(r));
      engine->run_until_idle();
      std::vector<std::vector<int32_t>> out;
      for (auto& s : streams) out.push_back(drain(*s));
      *preemptions = engine->stats().num_preemptions;
      *hits = engine->stats().prefix_cache_hits_total;
      EXPECT_EQ(engine->kv_blocks().num_used(), 0);
      return out;
    };
    int64_t preempt_on = 0, preempt_off = 0, hits_on = 0, hits_off = 0;
    const auto got = run_all(tight, &preempt_on, &hits_on);
    const auto want = run_all(tight_off, &preempt_off, &hits_off);
    EXPECT_EQ(got, want);
    EXPECT_GT(hits_on, 0);
    EXPECT_EQ(hits_off, 0);
    EXPECT_GT(preempt_on, 0) << "the budget should force preemption";
  }
}

TEST(PrefixEngine, OverlappedStepsHashOnlyFinalTokens) {
  EngineConfig overlapped;
  overlapped.overlap = Overlap::On;
  overlapped.scheduler.max_rows = 3;
  auto on = test::cpu_engine("gemma2", overlapped);
  auto off = test::cpu_engine("gemma2", {.enable_prefix_caching = false});
  std::vector<int32_t> history = prompt_of(33, 9);
  for (int turn = 0; turn < 3; turn++) {
    const Outcome got = run_one(*on, greedy(history, 18));
    EXPECT_EQ(got.tokens, run_one(*off, greedy(history, 18)).tokens) << "turn " << turn;
    if (turn > 0) {
      EXPECT_GT(got.cached_tokens, 32) << "turn " << turn;
    }
    history.insert(history.end(), got.tokens.begin(), got.tokens.end());
    history = with_suffix(history, 5, turn);
  }
  EXPECT_EQ(on->kv_blocks().num_used(), 0);
}

}  // namespace prefix_engine_test
}  // namespace tandem
