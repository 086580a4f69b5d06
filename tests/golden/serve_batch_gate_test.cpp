// The batch gate through `tandem serve` (issue 5, docs/DESIGN.md §6): for every oracle
// architecture, all prompts sent at once over HTTP to a server with --batch 8
// (/v1/completions, token-id prompts, temperature 0, 24 tokens, return_token_ids) come
// back as exactly the oracle's batched greedy continuations (batch_greedy.i); the same
// with --max-batched-tokens 16, so prompts are chunked and mixed with decoding rows.
// Afterwards /stats shows every KV block free.
#include <gtest/gtest.h>

#include <chrono>
#include <latch>
#include <memory>
#include <thread>

#include "../unit/cli/local_server.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace serve_batch_gate_test {

using server::Json;

// Architectures with an oracle folder that `tandem serve` handles; add new ones here.
const std::vector<std::string> kArchs = {"llama",  "qwen2",  "qwen3",     "mistral", "phi3",
                                         "gemma2", "gemma3", "qwen3_moe", "mixtral"};

// What `tandem serve --batch B --max-batched-tokens T` runs on an oracle folder.
std::unique_ptr<LocalServer> serve_oracle(const std::filesystem::path& dir, int batch,
                                          int max_batched_tokens) {
  EngineConfig config;
  config.scheduler.max_rows = batch;
  config.scheduler.max_batched_tokens = max_batched_tokens;
  config.max_model_len = 256;
  config.served_model_name = dir.filename().string();
  return std::make_unique<LocalServer>(dir, config);
}

struct Reply {
  int status = 0;  // 0: no HTTP answer
  std::string body;
};

// Posts every prompt from its own thread; the threads wait on a latch so the requests
// leave together and reach the engine while the others are still running.
std::vector<Reply> post_concurrently(int port, const std::vector<OraclePrompt>& prompts) {
  std::vector<Reply> replies(prompts.size());
  std::latch start(std::ptrdiff_t(prompts.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      Json body = {{"prompt", prompts[i].prompt},
                   {"max_tokens", prompts[i].batch_greedy.size()},
                   {"temperature", 0},
                   {"ignore_eos", true},
                   {"return_token_ids", true}};
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(120, 0);
      std::string text = body.dump();
      start.arrive_and_wait();
      auto res = client.Post("/v1/completions", text, "application/json");
      if (res) replies[i] = {res->status, res->body};
    });
  }
  for (auto& t : threads) t.join();
  return replies;
}

struct ServeCase {
  std::string arch;
  int max_batched_tokens;
};

class ServeBatchGate : public ::testing::TestWithParam<ServeCase> {};

TEST_P(ServeBatchGate, ConcurrentRequestsReturnBatchGreedy) {
  const ServeCase& c = GetParam();
  std::vector<OraclePrompt> prompts = load_oracle(c.arch);
  ASSERT_FALSE(prompts.empty());
  auto served = serve_oracle(oracle_dir(c.arch), /*batch=*/8, c.max_batched_tokens);
  std::vector<Reply> replies = post_concurrently(served->port(), prompts);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    ASSERT_EQ(replies[i].status, 200) << replies[i].body;
    Json j = Json::parse(replies[i].body);
    const Json& choice = j["choices"][0];
    EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), prompts[i].batch_greedy);
    EXPECT_EQ(choice["prompt_token_ids"].get<std::vector<int32_t>>(), prompts[i].prompt);
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], prompts[i].batch_greedy.size());
  }
  Json stats = served->settled_stats();
  ASSERT_TRUE(stats.is_object());
  EXPECT_EQ(stats["kv_blocks"]["used"], 0) << stats.dump();
  EXPECT_EQ(stats["kv_blocks"]["free"], stats["kv_blocks"]["total"]) << stats.dump();
  EXPECT_EQ(stats["requests_finished"], prompts.size()) << stats.dump();
}

std::vector<ServeCase> cases() {
  std::vector<ServeCase> out;
  for (const std::string& arch : kArchs)
    for (int budget : {2048, 16}) out.push_back({arch, budget});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Architectures, ServeBatchGate, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.arch + "_budget" +
                                  std::to_string(info.param.max_batched_tokens);
                         });

}  // namespace serve_batch_gate_test
}  // namespace tandem::test
