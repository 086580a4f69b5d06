// `tandem random-model` for Gemma 4: the presets resolve to the intended per-layer shapes,
// and a random checkpoint of a small config (every option on) holds exactly the tensors
// the gemma4_text model loads, and runs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/random_model_gemma4.h"
#include "engine/teacher_forcing.h"
#include "loader/checkpoint.h"
#include "model/arch/gemma4_config.h"
#include "model/model.h"

namespace tandem::cli {
namespace gemma4_random_model_test {

using json = nlohmann::json;

arch::Gemma4Config resolve(const json& j) {
  ModelConfig c = ModelConfig::parse(j, "preset");
  arch::apply_gemma4_defaults(c);
  return arch::parse_gemma4_config(c);
}

TEST(Gemma4RandomModel, PresetsResolve) {
  arch::Gemma4Config e4b = resolve(*gemma4_preset("gemma-4-e4b"));
  ASSERT_EQ(e4b.layers.size(), 42u);
  EXPECT_EQ(e4b.hidden_size_per_layer_input, 256);
  EXPECT_EQ(e4b.layers[5].head_dim, 512);
  EXPECT_EQ(e4b.layers[4].head_dim, 256);
  EXPECT_FALSE(e4b.layers[23].kv_source.has_value());  // first shared layer is 42 - 18 = 24
  EXPECT_EQ(e4b.layers[24].kv_source, 22);  // sliding: the last sliding layer before 24
  EXPECT_EQ(e4b.layers[41].kv_source, 23);  // full: layer 23
  EXPECT_FALSE(e4b.layers[5].k_eq_v);

  arch::Gemma4Config moe = resolve(*gemma4_preset("gemma-4-26b-a4b"));
  EXPECT_TRUE(moe.enable_moe_block);
  EXPECT_EQ(moe.num_experts, 128);
  EXPECT_EQ(moe.top_k_experts, 8);
  EXPECT_EQ(moe.layers[5].num_kv_heads, 2);
  EXPECT_TRUE(moe.layers[5].k_eq_v);
  EXPECT_EQ(moe.layers[0].num_kv_heads, 8);
  EXPECT_EQ(moe.layers[29].head_dim, 512);

  arch::Gemma4Config dense = resolve(*gemma4_preset("gemma-4-12b"));
  EXPECT_EQ(dense.layers.size(), 48u);
  EXPECT_EQ(dense.layers[47].head_dim, 512);
  EXPECT_FALSE(gemma4_preset("gemma-4-99b").has_value());
  EXPECT_NE(random_model_presets().find("gemma-4-26b-a4b"), std::string::npos);
}

TEST(Gemma4RandomModel, SmallCheckpointLoadsEveryTensorAndRuns) {
  const std::string S = "sliding_attention", F = "full_attention";
  json j = {{"model_type", "gemma4_text"}, {"vocab_size", 320}, {"hidden_size", 32},
            {"intermediate_size", 40}, {"num_hidden_layers", 6}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"head_dim", 8}, {"sliding_window", 4},
            {"layer_types", {S, F, S, S, F, F}}, {"num_kv_shared_layers", 2},
            {"use_double_wide_mlp", true}, {"attention_k_eq_v", true},
            {"per_layer_config", {{"1", {{"head_dim", 16}, {"num_key_value_heads", 1}}},
                                  {"4", {{"head_dim", 16}, {"num_key_value_heads", 1}}},
                                  {"5", {{"head_dim", 16}, {"num_key_value_heads", 1}}}}},
            {"hidden_size_per_layer_input", 4}, {"vocab_size_per_layer_input", 320},
            {"enable_moe_block", true}, {"num_experts", 3}, {"top_k_experts", 2},
            {"moe_intermediate_size", 8}, {"final_logit_softcapping", 30.0},
            {"tie_word_embeddings", false}, {"eos_token_id", 1}};
  auto dir = std::filesystem::temp_directory_path() /
             ("tandem_gemma4_random_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "in.json") << j.dump();
  RandomModelOptions o;
  o.config = (dir / "in.json").string();
  o.out = (dir / "model").string();
  o.dtype = "f32";
  ASSERT_EQ(run_random_model(o), 0);

  Checkpoint ck = Checkpoint::open(dir / "model");
  int64_t in_file = 0;
  for (auto& name : ck.names()) in_file += ck.get(name).numel();
  auto backend = make_cpu_backend();
  auto model = load_model(dir / "model", *backend);
  EXPECT_EQ(model->num_parameters(), in_file);  // nothing written that the model skips

  std::vector<int32_t> ids = {5, 17, 3, 290, 42, 7, 11};
  Tensor logits = teacher_forced_logits(*model, *backend, ids);
  ASSERT_EQ(logits.numel(), int64_t(ids.size()) * 320);
  for (int64_t i = 0; i < logits.numel(); i++) {
    ASSERT_TRUE(std::isfinite(logits.ptr<float>()[i])) << i;
    ASSERT_LE(std::fabs(logits.ptr<float>()[i]), 30.f);  // softcapped
  }
  std::filesystem::remove_all(dir);
}

}  // namespace gemma4_random_model_test
}  // namespace tandem::cli
