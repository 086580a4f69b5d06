// LoRA oracle parity (issue 23): every folder under tests/data/oracle/lora/<arch>/ holds
// PEFT adapters lora_<x>/ for the base model tests/data/oracle/<arch>/, and
// lora_golden.safetensors with, per prompt i of the base golden, greedy_<x>.i and
// logits_<x>.i (PEFT + transformers fp32). Each adapter is written into its own slot of one
// model: teacher-forced logits match within 1e-4 relative, greedy continuations through
// the engine are identical. Folders are discovered, not listed: a new fixture of the same
// shape runs the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "loader/safetensors.h"
#include "model/lora/lora_slots.h"
#include "lora_fixture.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace lora_oracle_test {

namespace fs = std::filesystem;

struct LoraSetup {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<Model> model;
  std::vector<std::string> names;  // names[s - 1] is in slot s
};

LoraSetup load_with_adapters(const std::string& arch) {
  LoraSetup s;
  s.names = adapter_names(arch);
  std::vector<PeftAdapter> adapters;
  int max_rank = 0;
  for (auto& n : s.names) {
    adapters.push_back(load_peft_adapter(lora_root() / arch / ("lora_" + n)));
    max_rank = std::max(max_rank, adapters.back().max_rank());
  }
  s.model = load_model(oracle_dir(arch), *s.backend,
                       LoadOptions{.lora = {.max_loras = int(adapters.size()), .max_rank = max_rank}});
  for (size_t i = 0; i < adapters.size(); i++)
    write_lora_slot(*s.backend, s.model->lora_targets(), int(i) + 1, adapters[i]);
  return s;
}

class LoraOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraOracle, TeacherForcedLogitsMatch) {
  LoraSetup s = load_with_adapters(GetParam());
  ASSERT_FALSE(s.names.empty());
  auto golden = SafetensorsFile::open(lora_root() / GetParam() / "lora_golden.safetensors");
  auto prompts = load_oracle(GetParam());
  for (size_t a = 0; a < s.names.size(); a++) {
    for (size_t i = 0; i < prompts.size(); i++) {
      std::string key = s.names[a] + "." + std::to_string(i);
      std::vector<int32_t> ids = prompts[i].prompt, greedy = ids_of(golden->tensor("greedy_" + key));
      ids.insert(ids.end(), greedy.begin(), greedy.end());
      Tensor want = golden->tensor("logits_" + key);
      Tensor ours = teacher_forced_logits(*s.model, *s.backend, ids, 0, 16, int(a) + 1);
      ASSERT_EQ(ours.numel(), want.numel()) << key;
      EXPECT_LE(relative_error(ours.ptr<float>(), want.ptr<float>(), size_t(want.numel())), 1e-4)
          << "adapter " << key;
      // The adapter must change the function: the base model's logits are far from these.
      if (i == 0) {
        Tensor base = teacher_forced_logits(*s.model, *s.backend, ids);
        EXPECT_GT(relative_error(base.ptr<float>(), want.ptr<float>(), size_t(want.numel())), 1e-3)
            << "adapter " << key << " hardly differs from the base model";
      }
    }
  }
}

// Every prompt with the base model and with each adapter, all submitted at once: rows of
// different adapters (and none) share each step, and each continues as the oracle did.
TEST_P(LoraOracle, MixedBatchGreedyMatchesThroughTheEngine) {
  const std::string arch = GetParam();
  std::vector<std::string> names = adapter_names(arch);
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir(arch), *backend,
                          LoadOptions{.lora = {.max_loras = int(names.size()), .max_rank = 8}});
  EngineConfig config;
  config.scheduler.max_rows = 16;
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, config);
  std::vector<uint64_t> ids;
  for (auto& n : names) ids.push_back(engine.load_lora(n, lora_root() / arch / ("lora_" + n)).id);
  EXPECT_NE(ids.front(), ids.back()) << "two adapters share an id";
  auto golden = SafetensorsFile::open(lora_root() / arch / "lora_golden.safetensors");
  auto prompts = load_oracle(arch);
  struct Job {
    std::shared_ptr<RequestStream> stream;
    std::vector<int32_t> want;
    std::string what;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < prompts.size(); i++)
    for (size_t a = 0; a <= names.size(); a++) {
      GenerationRequest req;
      req.prompt = prompts[i].prompt;
      req.max_tokens = int(prompts[i].greedy.size());
      req.sampling.temperature = 0;
      req.ignore_eos = true;
      std::string key = a == 0 ? "base" : names[a - 1];
      if (a > 0) req.lora = names[a - 1];
      std::vector<int32_t> want = a == 0 ? prompts[i].greedy
                                         : ids_of(golden->tensor("greedy_" + key + "." + std::to_string(i)));
      jobs.push_back({engine.submit(req), want, key + "." + std::to_string(i)});
    }
  engine.run_until_idle();
  for (auto& j : jobs) {
    std::vector<int32_t> got;
    while (auto c = j.stream->pop(std::chrono::milliseconds(0)))
      for (auto& t : c->tokens) got.push_back(t.token);
    EXPECT_EQ(got, j.want) << j.what;
  }
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
  for (auto& a : engine.loras().list()) EXPECT_EQ(a.num_users, 0) << a.name;
}

TEST(LoraEngine, UnknownAdapterIsRefused) {
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir("llama"), *backend,
                          LoadOptions{.lora = {.max_loras = 1, .max_rank = 8}});
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, EngineConfig{});
  GenerationRequest req;
  req.prompt = {1, 2, 3};
  req.lora = "nope";
  auto c = engine.submit(req)->pop(std::chrono::milliseconds(0));
  ASSERT_TRUE(c && c->finish);
  EXPECT_EQ(*c->finish, FinishReason::Error);
  EXPECT_NE(c->error.find("nope"), std::string::npos) << c->error;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LoraOracle, ::testing::ValuesIn(lora_archs()),
                         [](const auto& info) { return info.param; });

}  // namespace lora_oracle_test
}  // namespace tandem::test
