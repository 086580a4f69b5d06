// Gemma 3n's configuration: HF's defaults for absent fields (Gemma3nTextConfig), the KV
// sharing map (HF's kv_shared_layer_index), the sparsity multiplier Φ⁻¹, and clear
// errors for configs HF rejects.
#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/arch/gemma3n_config.h"

namespace tandem::arch {
namespace gemma3n_config_test {

using json = nlohmann::json;

json fixture_config() {
  std::ifstream in(std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "gemma3n" / "config.json");
  return json::parse(in);
}

// A config with only what ModelConfig requires: every Gemma 3n field takes its default.
json minimal_config(int num_layers) {
  return {{"model_type", "gemma3n_text"},
          {"vocab_size", 64},
          {"hidden_size", 32},
          {"num_hidden_layers", num_layers},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"head_dim", 16},
          {"intermediate_size", 64}};
}

Gemma3nConfig parse(const json& j, ModelConfig* out = nullptr) {
  ModelConfig c = ModelConfig::parse(j, "config.json");
  Gemma3nConfig g = Gemma3nConfig::parse(c);
  if (out) *out = c;
  return g;
}

std::string parse_error(const json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gemma3nConfig, NormalQuantilesMatchTheTables) {
  EXPECT_NEAR(normal_icdf(0.95), 1.6448536269514722, 1e-12);
  EXPECT_NEAR(normal_icdf(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_icdf(0.9), 1.2815515655446004, 1e-12);
  EXPECT_NEAR(normal_icdf(0.5), 0.0, 1e-14);
  EXPECT_NEAR(normal_icdf(0.025), -1.959963984540054, 1e-12);
  EXPECT_THROW(normal_icdf(1.0), Error);
  EXPECT_THROW(normal_icdf(0.0), Error);
}

TEST(Gemma3nConfig, ReadsTheFixture) {
  ModelConfig c;
  Gemma3nConfig g = parse(fixture_config(), &c);
  EXPECT_EQ(g.altup_num_inputs, 4);
  EXPECT_EQ(g.altup_active_idx, 0);
  EXPECT_TRUE(g.altup_correct_scale);
  EXPECT_EQ(g.laurel_rank, 8);
  EXPECT_EQ(g.hidden_size_per_layer_input, 8);
  EXPECT_EQ(g.vocab_size_per_layer_input, 512);
  EXPECT_EQ(g.activation_sparsity, (std::vector<float>{0.95f, 0.95f, 0, 0, 0, 0}));
  // layer_types s s f s s f; the last two layers share: 4 (sliding) reads 3, 5 (full) reads 2.
  EXPECT_EQ(g.kv_source, (std::vector<std::optional<int>>{{}, {}, {}, {}, 3, 2}));
  EXPECT_EQ(c.sliding_window, 24);
  EXPECT_FLOAT_EQ(c.final_logit_softcap, 30.f);
  EXPECT_DOUBLE_EQ(c.rope.at(LayerKind::Full).theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rope.at(LayerKind::Sliding).theta, 1e4);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(Gemma3nConfig, AbsentFieldsTakeHfDefaults) {
  ModelConfig c;
  Gemma3nConfig g = parse(minimal_config(35), &c);
  EXPECT_EQ(g.altup_num_inputs, 4);
  EXPECT_EQ(g.laurel_rank, 64);
  EXPECT_EQ(g.hidden_size_per_layer_input, 256);
  EXPECT_EQ(g.vocab_size_per_layer_input, 262144);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);
  // Four sliding layers, then a full one; window 512.
  for (int i = 0; i < 35; i++)
    EXPECT_EQ(c.layer_kinds[i], (i + 1) % 5 == 0 ? LayerKind::Full : LayerKind::Sliding) << i;
  EXPECT_EQ(c.sliding_window, 512);
  // The first 10 of more than 10 layers are 95% sparse.
  for (int i = 0; i < 35; i++) EXPECT_FLOAT_EQ(g.activation_sparsity[i], i < 10 ? 0.95f : 0.f);
  // 15 shared layers: 20..34 read 18 (last sliding before 20) or 19 (last full).
  for (int i = 0; i < 35; i++) {
    std::optional<int> want;
    if (i >= 20) want = (i + 1) % 5 == 0 ? 19 : 18;
    EXPECT_EQ(g.kv_source[i], want) << i;
  }
  EXPECT_FLOAT_EQ(c.final_logit_softcap, 30.f);
  EXPECT_DOUBLE_EQ(c.rope.at(LayerKind::Full).theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rope.at(LayerKind::Sliding).theta, 1e4);
}

TEST(Gemma3nConfig, OlderRopeSpellingKeepsSlidingLayersUnscaled) {
  json j = minimal_config(5);
  j["rope_theta"] = 5e5;
  j["rope_local_base_freq"] = 2e3;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  ModelConfig c;
  parse(j, &c);
  EXPECT_DOUBLE_EQ(c.rope.at(LayerKind::Full).theta, 5e5);
  EXPECT_EQ(c.rope.at(LayerKind::Full).type, "linear");
  EXPECT_DOUBLE_EQ(c.rope.at(LayerKind::Sliding).theta, 2e3);
  EXPECT_EQ(c.rope.at(LayerKind::Sliding).type, "default");
}

TEST(Gemma3nConfig, FewLayersAreDenseAndUnsharedByDefault) {
  json j = minimal_config(4);
  j["num_kv_shared_layers"] = 0;
  Gemma3nConfig g = parse(j);
  EXPECT_EQ(g.activation_sparsity, std::vector<float>(4, 0.f));
  EXPECT_EQ(g.kv_source, std::vector<std::optional<int>>(4));
  j["num_kv_shared_layers"] = 4;  // HF: sharing starts at layer 0 → no layer shares
  EXPECT_EQ(parse(j).kv_source, std::vector<std::optional<int>>(4));
}

TEST(Gemma3nConfig, RejectsWhatHfRejects) {
  json j = minimal_config(4);
  j["activation_sparsity_pattern"] = {0.5, 0.0};
  EXPECT_NE(parse_error(j).find("activation_sparsity_pattern has 2 entries for 4 layers"),
            std::string::npos)
      << parse_error(j);
  j = minimal_config(4);
  j["altup_active_idx"] = 4;
  EXPECT_NE(parse_error(j).find("altup_active_idx"), std::string::npos);
  // Shared layers 2, 3 are full, but layers 0, 1 are all sliding: no producer.
  j = minimal_config(4);
  j["sliding_window"] = 8;
  j["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention", "full_attention"};
  j["num_kv_shared_layers"] = 2;
  EXPECT_NE(parse_error(j).find("no earlier layer"), std::string::npos) << parse_error(j);
}

}  // namespace gemma3n_config_test
}  // namespace tandem::arch
