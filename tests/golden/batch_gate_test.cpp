// The batch gate (issue 5, docs/DESIGN.md §6): all oracle prompts submitted at once to an
// engine with --batch 8 produce exactly the oracle's batched greedy continuations, also
// when a small token budget chunks the prompts and mixes them with decoding rows, and
// every KV block is free at the end.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace batch_gate_test {

struct BatchCase {
  std::string arch;
  int max_batched_tokens;
};

class BatchGate : public ::testing::TestWithParam<BatchCase> {};

TEST_P(BatchGate, AllPromptsTogetherMatchBatchGreedy) {
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir(GetParam().arch), *backend);
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = GetParam().max_batched_tokens;
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, config);
  auto prompts = load_oracle(GetParam().arch);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& p : prompts) {
    GenerationRequest req;
    req.prompt = p.prompt;
    req.max_tokens = int(p.batch_greedy.size());
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    streams.push_back(engine.submit(req));
  }
  engine.run_until_idle();
  for (size_t i = 0; i < prompts.size(); i++) {
    std::vector<int32_t> got;
    while (auto c = streams[i]->pop(std::chrono::milliseconds(0)))
      for (auto& t : c->tokens) got.push_back(t.token);
    EXPECT_EQ(got, prompts[i].batch_greedy) << "prompt " << i;
  }
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
}

std::vector<BatchCase> cases() {
  std::vector<BatchCase> out;
  for (const char* arch : {"llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3",
                           "qwen3_moe", "mixtral", "gemma3n", "gemma4", "gemma4_moe",
                           "gemma4_kvshare", "gemma4_moe_nople"})
    for (int budget : {2048, 16}) out.push_back({arch, budget});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchGate, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.arch + "_budget" + std::to_string(info.param.max_batched_tokens);
                         });

}  // namespace batch_gate_test
}  // namespace tandem::test
