// Every architecture tandem serves from GGUF, through llama.cpp's conventions: the oracle
// folders written as GGUF files (gguf_from_hf.h) load through load_model and reproduce the
// folders' transformers logits within 1e-4 — qwen2's biases unpermuted, llama's and
// Mixtral's Q/K rows un-permuted, Llama 3 scaling from rope_freqs, Gemma's 1 + w norms,
// sliding layers and softcaps, tied embeddings without output.weight, Phi-3's fused
// qkv / gate|up, Mixtral's and Qwen3-MoE's stacked experts. The translated config matches the
// folder's config.json field by field.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <unistd.h>

#include "engine/teacher_forcing.h"
#include "gguf_from_hf.h"
#include "loader/safetensors.h"
#include "lora_fixture.h"
#include "model/lora/lora_slots.h"
#include "model/lora/peft_adapter.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

class GgufArch : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem-gguf-arch-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    file_ = dir_ / (GetParam() + ".gguf");
    write_gguf_from_hf(oracle_dir(GetParam()), file_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_, file_;
};

std::vector<int32_t> concat(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST_P(GgufArch, LogitsMatchTheOracle) {
  auto backend = make_cpu_backend();
  auto model = load_model(file_, *backend);
  for (auto& p : load_oracle(GetParam())) {
    Tensor ours = teacher_forced_logits(*model, *backend, concat(p.prompt, p.greedy));
    ASSERT_EQ(ours.numel(), p.logits.numel());
    EXPECT_LE(relative_error(ours.ptr<float>(), p.logits.ptr<float>(), size_t(ours.numel())), 1e-4)
        << "prompt of " << p.prompt.size() << " tokens";
  }
}

TEST_P(GgufArch, ConfigMatchesConfigJson) {
  auto backend = make_cpu_backend();
  const ModelConfig g = load_model(file_, *backend)->config();
  const ModelConfig h = ModelConfig::load(oracle_dir(GetParam()));
  EXPECT_EQ(g.model_type, h.model_type);
  EXPECT_EQ(g.vocab_size, h.vocab_size);
  EXPECT_EQ(g.hidden_size, h.hidden_size);
  EXPECT_EQ(g.intermediate_sizes, h.intermediate_sizes);
  EXPECT_EQ(g.num_layers, h.num_layers);
  EXPECT_EQ(g.num_heads, h.num_heads);
  EXPECT_EQ(g.num_kv_heads, h.num_kv_heads);
  EXPECT_EQ(g.head_dim, h.head_dim);
  EXPECT_FLOAT_EQ(g.rms_norm_eps, h.rms_norm_eps);
  EXPECT_EQ(g.activation, h.activation);
  EXPECT_EQ(g.layer_kinds, h.layer_kinds);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  EXPECT_EQ(g.attn_logit_softcap, h.attn_logit_softcap);
  EXPECT_EQ(g.final_logit_softcap, h.final_logit_softcap);
  EXPECT_EQ(g.query_pre_attn_scalar, h.query_pre_attn_scalar);
  EXPECT_EQ(g.num_experts, h.num_experts);
  EXPECT_EQ(g.num_experts_per_tok, h.num_experts_per_tok);
  EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
  EXPECT_EQ(g.tie_word_embeddings, h.tie_word_embeddings);
  EXPECT_EQ(g.eos_token_ids, h.eos_token_ids);
  for (LayerKind k : {LayerKind::Full, LayerKind::Sliding})
    EXPECT_EQ(g.rope.at(k).theta, h.rope.at(k).theta);
}

// PEFT adapters over GGUF base weights (issue 42, item 8): the adapters name Hugging Face
// modules, which the GGUF tensors answer to — llama's q and k included, un-permuted before the
// adapter's rows meet them. Logits match the LoRA oracle (PEFT + transformers).
class GgufLora : public GgufArch {};

TEST_P(GgufLora, AdaptersApplyOverGgufWeights) {
  auto backend = make_cpu_backend();
  std::vector<std::string> names = adapter_names(GetParam());
  std::vector<PeftAdapter> adapters;
  int max_rank = 0;
  for (auto& n : names) {
    adapters.push_back(load_peft_adapter(lora_root() / GetParam() / ("lora_" + n)));
    max_rank = std::max(max_rank, adapters.back().max_rank());
  }
  auto model = load_model(file_, *backend,
                          LoadOptions{.lora = {.max_loras = int(adapters.size()), .max_rank = max_rank}});
  for (size_t i = 0; i < adapters.size(); i++)
    write_lora_slot(*backend, model->lora_targets(), int(i) + 1, adapters[i]);
  auto golden = SafetensorsFile::open(lora_root() / GetParam() / "lora_golden.safetensors");
  auto prompts = load_oracle(GetParam());
  for (size_t a = 0; a < names.size(); a++) {
    const std::string key = names[a] + ".0";
    Tensor g = golden->tensor("greedy_" + key);
    std::vector<int32_t> ids = concat(prompts[0].prompt, std::vector<int32_t>(g.ptr<int32_t>(), g.ptr<int32_t>() + g.numel()));
    Tensor want = golden->tensor("logits_" + key);
    Tensor ours = teacher_forced_logits(*model, *backend, ids, 0, 16, int(a) + 1);
    ASSERT_EQ(ours.numel(), want.numel());
    EXPECT_LE(relative_error(ours.ptr<float>(), want.ptr<float>(), size_t(want.numel())), 1e-4) << key;
  }
}

// F16 matrices, and a model split over shards (llama.cpp's gguf-split layout) loaded from
// its first shard.
TEST(GgufArchVariants, F16AndSplitFilesMatchTheOracle) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-gguf-split-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Variant {
    std::string arch;
    HfToGgufOptions options;
  };
  for (const Variant& v : {Variant{"qwen2", {.f16 = true, .shards = 3}}, Variant{"mixtral", {.shards = 2}}}) {
    SCOPED_TRACE(v.arch);
    write_gguf_from_hf(oracle_dir(v.arch), dir / (v.arch + ".gguf"), v.options);
    const fs::path first = dir / fmt::format("{}-00001-of-{:05d}.gguf", v.arch, v.options.shards);
    ASSERT_TRUE(fs::exists(first));
    auto backend = make_cpu_backend();
    auto model = load_model(first, *backend);
    for (auto& p : load_oracle(v.arch)) {
      Tensor ours = teacher_forced_logits(*model, *backend, concat(p.prompt, p.greedy));
      EXPECT_LE(relative_error(ours.ptr<float>(), p.logits.ptr<float>(), size_t(ours.numel())), 1e-4);
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufArch,
                         ::testing::Values("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
                                           "qwen3_moe", "mixtral"),
                         [](const auto& info) { return info.param; });
// The architectures with a LoRA oracle (tests/data/oracle/lora) that GGUF holds.
INSTANTIATE_TEST_SUITE_P(Architectures, GgufLora, ::testing::Values("llama", "qwen2", "qwen3", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem::test
