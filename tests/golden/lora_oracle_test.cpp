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
#include "oracle_fixture.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

fs::path lora_root() { return fs::path(TANDEM_TEST_DATA) / "oracle" / "lora"; }

std::vector<std::string> lora_archs() {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(lora_root()))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The adapters' short names: "a" for lora_a/.
std::vector<std::string> adapter_names(const std::string& arch) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(lora_root() / arch)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.starts_with("lora_")) out.push_back(n.substr(5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int32_t> ids_of(const Tensor& t) {
  return std::vector<int32_t>(t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel());
}

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
                       LoraCapacity{.max_loras = int(adapters.size()), .max_rank = max_rank});
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

INSTANTIATE_TEST_SUITE_P(Fixtures, LoraOracle, ::testing::ValuesIn(lora_archs()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem::test
