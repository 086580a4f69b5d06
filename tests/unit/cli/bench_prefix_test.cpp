// The prefix-cache workloads of the load generator against tandem's own server on the
// oracle llama: --shared-prefix-len prompts all start with the same ids and later ones
// find them cached; --multi-turn conversations resend prompt + generated reply + a new
// turn, and each turn finds the history before it cached.
#include <gtest/gtest.h>

#include <random>

#include "cli/bench/bench_report.h"
#include "cli/bench/load_gen.h"
#include "cli/bench/sse_stream.h"
#include "cli/bench/workload.h"
#include "engine/engine.h"
#include "local_server.h"

namespace tandem::cli::bench {
namespace bench_prefix_test {

using test::LocalServer;

std::unique_ptr<LocalServer> llama_server() {
  EngineConfig config;
  config.scheduler.max_rows = 4;
  config.max_model_len = 256;
  config.served_model_name = "oracle-llama";
  return std::make_unique<LocalServer>(TANDEM_TEST_DATA "/oracle/llama", config);
}

TEST(BenchPrefix, SharedPrefixPromptsHitTheCache) {
  auto server = llama_server();
  Endpoint endpoint = parse_endpoint(server->url());
  RequestShape shape{.model = "oracle-llama", .max_tokens = 4};
  std::mt19937_64 rng(3);
  const std::vector<int32_t> prefix = random_prompts(rng, 1, 40, 100, 500)[0];
  LoadPlan plan;
  plan.prompts = prefixed_prompts(rng, prefix, 5, 8, 100, 500);
  for (const auto& p : plan.prompts) {
    ASSERT_EQ(p.size(), 48u);
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), p.begin()));
  }
  LoadResult result = run_load(endpoint, shape, plan);  // one at a time
  for (const RequestRecord& r : result.records) {
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(r.cached_tokens.has_value());
    EXPECT_EQ(*r.cached_tokens, r.index == 0 ? 0 : 32) << "request " << r.index;
  }
  EXPECT_EQ(summarize(result.records, 1, std::nullopt, result.duration_s).total_cached_tokens, 4 * 32);
}

TEST(BenchPrefix, MultiTurnResendsTheGeneratedReply) {
  auto server = llama_server();
  Endpoint endpoint = parse_endpoint(server->url());
  RequestShape shape{.model = "oracle-llama", .max_tokens = 10, .return_token_ids = true};
  std::mt19937_64 rng(4);
  ConversationPlan plan;
  plan.concurrency = 2;
  for (int i = 0; i < 3; i++)
    plan.conversations.push_back({random_prompts(rng, 1, 20, 100, 500)[0],
                                  random_prompts(rng, 2, 7, 100, 500),
                                  random_prompts(rng, 2, 10, 100, 500)});
  LoadResult result = run_conversations(endpoint, shape, plan);
  ASSERT_EQ(result.records.size(), 9u);
  for (const RequestRecord& r : result.records) {
    SCOPED_TRACE("record " + std::to_string(r.index));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.turn, r.index % 3);
    EXPECT_EQ(r.output_ids.size(), 10u);  // the server streams the generated ids
    EXPECT_EQ(r.num_prompt_tokens, 20 + r.turn * (10 + 7));
    // Every full block of the history (its last token's K/V aside) is cached.
    const int history = r.turn == 0 ? 0 : 20 + (r.turn - 1) * 17 + 10;
    EXPECT_EQ(r.cached_tokens.value_or(-1), (std::max(history - 1, 0) / 16) * 16);
  }
  const std::string table = turn_table(result.records, 3);
  EXPECT_NE(table.find("TTFT p50"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4);
}

TEST(BenchPrefix, TallyReadsCachedTokensAndTokenIds) {
  StreamTally tally;
  tally_completion_event(R"({"choices":[{"text":"a","token_ids":[5,6]}]})", tally);
  tally_completion_event(R"({"choices":[{"text":"b","token_ids":[7]}]})", tally);
  tally_completion_event(
      R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":32}}})",
      tally);
  EXPECT_EQ(tally.token_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(tally.usage_cached_tokens, 32);
}

}  // namespace bench_prefix_test
}  // namespace tandem::cli::bench
