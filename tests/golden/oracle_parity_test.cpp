// Gate 1 (docs/DESIGN.md §6): on every oracle architecture, teacher-forced logits match
// transformers' fp32 logits within 1e-4 relative, and greedy decoding through the
// engine's serial path reproduces the oracle's continuation token for token.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace oracle_parity_test {

class OracleParity : public ::testing::TestWithParam<std::string> {};

std::vector<int32_t> concat(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST_P(OracleParity, TeacherForcedLogitsMatch) {
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir(GetParam()), *backend);
  for (auto& p : load_oracle(GetParam())) {
    auto ids = concat(p.prompt, p.greedy);
    Tensor ours = teacher_forced_logits(*model, *backend, ids);
    ASSERT_EQ(ours.numel(), p.logits.numel());
    double err = relative_error(ours.ptr<float>(), p.logits.ptr<float>(), size_t(ours.numel()));
    EXPECT_LE(err, 1e-4) << "prompt of " << p.prompt.size() << " tokens";
    // Chunked prefill (7 tokens a step) computes the same function.
    Tensor chunked = teacher_forced_logits(*model, *backend, ids, 7);
    double err2 = relative_error(chunked.ptr<float>(), p.logits.ptr<float>(), size_t(ours.numel()));
    EXPECT_LE(err2, 1e-4) << "chunked, prompt of " << p.prompt.size() << " tokens";
  }
}

TEST_P(OracleParity, GreedyMatchesThroughTheEngine) {
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir(GetParam()), *backend);
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, EngineConfig{});
  for (auto& p : load_oracle(GetParam())) {
    GenerationRequest req;
    req.prompt = p.prompt;
    req.max_tokens = int(p.greedy.size());
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    auto stream = engine.submit(req);
    engine.run_until_idle();
    std::vector<int32_t> got;
    while (auto c = stream->pop(std::chrono::milliseconds(0)))
      for (auto& t : c->tokens) got.push_back(t.token);
    EXPECT_EQ(got, p.greedy) << "prompt of " << p.prompt.size() << " tokens";
  }
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, OracleParity,
                         ::testing::Values("llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2",
                                           "gemma3", "qwen3_moe", "mixtral", "gemma3n", "gemma4",
                                           "gemma4_moe", "gemma4_kvshare", "gemma4_moe_nople"),
                         [](const auto& info) { return info.param; });

}  // namespace oracle_parity_test
}  // namespace tandem::test
