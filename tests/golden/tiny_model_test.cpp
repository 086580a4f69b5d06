// The embedded default model (models/tiny-kjv): tandem tokenizes the reference prompt
// and decodes it greedily exactly as transformers did when the model was trained
// (train_log.json → greedy_reference, recorded on the GPU machine).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {
namespace tiny_model_test {

TEST(TinyModel, GreedyMatchesTransformers) {
  std::filesystem::path dir = std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." / "models" / "tiny-kjv";
  auto log = nlohmann::json::parse(std::ifstream(dir / "train_log.json"));
  auto ref = log.at("greedy_reference");
  auto tokenizer = Tokenizer::load(dir / "tokenizer.json");
  std::vector<int32_t> prompt = tokenizer->encode(ref.at("prompt").get<std::string>(), true);
  EXPECT_EQ(prompt, ref.at("prompt_ids").get<std::vector<int32_t>>());
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend);
  Engine engine(make_executor(std::move(backend), std::move(model)), tokenizer, EngineConfig{});
  GenerationRequest req;
  req.prompt = prompt;
  auto expected = ref.at("new_ids").get<std::vector<int32_t>>();
  req.max_tokens = int(expected.size());
  req.sampling.temperature = 0;
  req.ignore_eos = true;
  auto stream = engine.submit(req);
  engine.run_until_idle();
  std::vector<int32_t> got;
  std::string text;
  while (auto c = stream->pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) got.push_back(t.token);
    text += c->text;
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(text, ref.at("text").get<std::string>());
}

}  // namespace tiny_model_test
}  // namespace tandem::test
