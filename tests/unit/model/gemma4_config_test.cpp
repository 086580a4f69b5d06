// Gemma 4's per-layer resolution (head_dim / KV heads per layer, KV sharing, double-wide
// MLPs, k_eq_v), HF's defaults, the errors, and the KV specs of loaded models.
#include <gtest/gtest.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/safetensors_writer.h"
#include "model/arch/gemma4.h"
#include "model/arch/gemma4_config.h"

namespace tandem::arch {
namespace gemma4_config_test {

using json = nlohmann::json;
const std::string S = "sliding_attention", F = "full_attention";

json base() {
  return {{"model_type", "gemma4_text"}, {"vocab_size", 64}, {"hidden_size", 32},
          {"intermediate_size", 48}, {"num_hidden_layers", 6}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"head_dim", 8}, {"sliding_window", 16},
          {"hidden_size_per_layer_input", 4}, {"vocab_size_per_layer_input", 64},
          {"layer_types", {S, S, S, S, S, F}}, {"per_layer_config", {{"5", {{"head_dim", 32}}}}}};
}

ModelConfig resolved(const json& j) {
  ModelConfig c = ModelConfig::parse(j, "config.json");
  apply_gemma4_defaults(c);
  return c;
}

Gemma4Config parse(const json& j) { return parse_gemma4_config(resolved(j)); }

std::string error_of(const json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gemma4Config, PerLayerConfigGivesFullLayersTheirHeadDim) {
  Gemma4Config g = parse(base());
  ASSERT_EQ(g.layers.size(), 6u);
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ(g.layers[size_t(i)].kind, LayerKind::Sliding);
    EXPECT_EQ(g.layers[size_t(i)].head_dim, 8);
    EXPECT_EQ(g.layers[size_t(i)].window, 16);
  }
  EXPECT_EQ(g.layers[5].kind, LayerKind::Full);
  EXPECT_EQ(g.layers[5].head_dim, 32);
  EXPECT_EQ(g.layers[5].num_kv_heads, 2);
  EXPECT_EQ(g.layers[5].window, 0);
  EXPECT_FALSE(g.layers[5].kv_source.has_value());
  EXPECT_FALSE(g.layers[5].k_eq_v);
  EXPECT_EQ(g.hidden_size_per_layer_input, 4);
  EXPECT_FALSE(g.enable_moe_block);
}

TEST(Gemma4Config, KvSharingReadsTheLastEarlierLayerOfItsKind) {
  json j = base();
  j["num_hidden_layers"] = 8;
  j["layer_types"] = {S, S, F, S, S, F, S, F};
  j["num_kv_shared_layers"] = 3;  // layers 5, 6, 7
  j["use_double_wide_mlp"] = true;
  j["attention_k_eq_v"] = true;
  j["per_layer_config"] = {{"2", {{"head_dim", 16}, {"num_key_value_heads", 1}}},
                           {"5", {{"head_dim", 16}, {"num_key_value_heads", 1}}},
                           {"7", {{"head_dim", 16}, {"num_key_value_heads", 1}}}};
  Gemma4Config g = parse(j);
  std::vector<int> sources, widths;
  for (auto& l : g.layers) {
    sources.push_back(l.kv_source.value_or(-1));  // -1: its own, for the comparison
    widths.push_back(l.intermediate_size);
  }
  EXPECT_EQ(sources, (std::vector<int>{-1, -1, -1, -1, -1, 2, 4, 2}));
  EXPECT_EQ(widths, (std::vector<int>{48, 48, 48, 48, 48, 96, 96, 96}));
  // k_eq_v applies to full layers that compute their own KV.
  EXPECT_TRUE(g.layers[2].k_eq_v);
  EXPECT_FALSE(g.layers[1].k_eq_v);
  EXPECT_FALSE(g.layers[5].k_eq_v);
  EXPECT_EQ(g.layers[7].head_dim, 16);
  EXPECT_EQ(g.layers[7].num_kv_heads, 1);
}

TEST(Gemma4Config, WithoutPerLayerConfigFullLayersGetGlobalHeadDim) {
  json j = base();
  j.erase("per_layer_config");
  j["global_head_dim"] = 16;
  j["num_global_key_value_heads"] = 1;
  Gemma4Config g = parse(j);  // kv heads stay global: attention_k_eq_v is off
  EXPECT_EQ(g.layers[5].head_dim, 16);
  EXPECT_EQ(g.layers[5].num_kv_heads, 2);
  EXPECT_EQ(g.layers[0].head_dim, 8);
  j["attention_k_eq_v"] = true;
  g = parse(j);
  EXPECT_EQ(g.layers[5].num_kv_heads, 1);
  EXPECT_TRUE(g.layers[5].k_eq_v);
  j.erase("global_head_dim");
  EXPECT_EQ(parse(j).layers[5].head_dim, 512);  // HF's default global_head_dim
}

TEST(Gemma4Config, HfDefaultsForLayerTypesRopeAndEmbeddings) {
  json j = base();
  j["num_hidden_layers"] = 8;
  j.erase("layer_types");
  j.erase("per_layer_config");
  j.erase("tie_word_embeddings");
  ModelConfig c = resolved(j);
  // 5 sliding : 1 full, and the last layer is always full.
  std::vector<LayerKind> want = {LayerKind::Sliding, LayerKind::Sliding, LayerKind::Sliding,
                                 LayerKind::Sliding, LayerKind::Sliding, LayerKind::Full,
                                 LayerKind::Sliding, LayerKind::Full};
  EXPECT_EQ(c.layer_kinds, want);
  EXPECT_EQ(c.rope_for(5).type, "proportional");
  EXPECT_DOUBLE_EQ(c.rope_for(5).partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(c.rope_for(5).theta, 1e6);
  EXPECT_EQ(c.rope_for(0).type, "default");
  EXPECT_DOUBLE_EQ(c.rope_for(0).theta, 1e4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.activation, Activation::GeluTanh);

  json k = base();
  k["layer_types"] = {S, S, S, S, F, S};  // last one sliding: forced to full
  EXPECT_EQ(resolved(k).layer_kinds.back(), LayerKind::Full);
}

TEST(Gemma4Config, MoeFields) {
  json j = base();
  j["enable_moe_block"] = true;
  j["num_experts"] = 4;
  j["top_k_experts"] = 2;
  j["moe_intermediate_size"] = 16;
  Gemma4Config g = parse(j);
  EXPECT_TRUE(g.enable_moe_block);
  EXPECT_EQ(g.num_experts, 4);
  EXPECT_EQ(g.top_k_experts, 2);
  EXPECT_EQ(g.moe_intermediate_size, 16);
  j["num_experts"] = nullptr;
  EXPECT_NE(error_of(j).find("enable_moe_block needs num_experts"), std::string::npos)
      << error_of(j);
}

TEST(Gemma4Config, ErrorsNameTheField) {
  json j = base();
  j["per_layer_config"] = {{"9", {{"head_dim", 32}}}};
  EXPECT_NE(error_of(j).find("per_layer_config key '9'"), std::string::npos) << error_of(j);

  j = base();
  j["per_layer_config"] = {{"5", {{"rms_norm_eps", 0.5}}}};
  EXPECT_NE(error_of(j).find("rms_norm_eps"), std::string::npos) << error_of(j);

  j = base();
  j["rms_norm_eps"] = 1e-6;
  j["per_layer_config"] = {{"5", {{"rms_norm_eps", 1e-6}}}};  // equal to the global: fine
  EXPECT_EQ(error_of(j), "");

  j = base();
  j["num_kv_shared_layers"] = 6;
  EXPECT_NE(error_of(j).find("num_kv_shared_layers"), std::string::npos) << error_of(j);

  j = base();
  j["num_hidden_layers"] = 2;
  j["layer_types"] = {F, S};
  j["per_layer_config"] = json::object();
  j["num_kv_shared_layers"] = 1;  // layer 1 is forced full and reads layer 0: fine
  EXPECT_EQ(error_of(j), "");
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {F, S, F};
  j["num_kv_shared_layers"] = 2;  // layer 1 (sliding) has no sliding layer before it
  EXPECT_NE(error_of(j).find("no earlier layer"), std::string::npos) << error_of(j);

  j = base();
  j["num_kv_shared_layers"] = 1;
  j["layer_types"] = {S, S, S, F, S, F};  // layer 5 (head_dim 32) would read layer 3's (8)
  EXPECT_NE(error_of(j).find("geometry"), std::string::npos) << error_of(j);

  j = base();
  j["use_bidirectional_attention"] = "all";
  EXPECT_NE(error_of(j).find("use_bidirectional_attention"), std::string::npos);
}

std::vector<LayerKvSpec> specs_of(const std::string& arch) {
  auto backend = make_cpu_backend();
  auto model = load_model(std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / arch, *backend);
  return model->kv_specs();
}

TEST(Gemma4Config, KvSpecsOfTheOracleModels) {
  auto specs = specs_of("gemma4");
  ASSERT_EQ(specs.size(), 6u);
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ(specs[size_t(i)].head_dim, 16);
    EXPECT_EQ(specs[size_t(i)].window, 24);
    EXPECT_FALSE(specs[size_t(i)].shares_with.has_value());
  }
  EXPECT_EQ(specs[5].head_dim, 512);
  EXPECT_EQ(specs[5].num_kv_heads, 2);
  EXPECT_EQ(specs[5].window, 0);

  specs = specs_of("gemma4_kvshare");  // layer_types S S F S S F S F, last 3 shared
  ASSERT_EQ(specs.size(), 8u);
  std::vector<int> shares;
  for (auto& s : specs) shares.push_back(s.shares_with.value_or(-1));  // -1: its own
  EXPECT_EQ(shares, (std::vector<int>{-1, -1, -1, -1, -1, 2, 4, 2}));
  EXPECT_EQ(specs[2].head_dim, 32);
  EXPECT_EQ(specs[2].num_kv_heads, 1);
  EXPECT_EQ(specs[7].head_dim, 32);
  EXPECT_EQ(specs[6].head_dim, 24);
  EXPECT_EQ(specs[6].window, 24);
}

TEST(Gemma4Config, LoadsTheTextModelOfAMultimodalCheckpoint) {
  // Gemma4ForConditionalGeneration files hold the text model under "model.language_model.".
  auto src = std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "gemma4";
  auto dir = std::filesystem::temp_directory_path() /
             ("tandem_gemma4_mm_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src / "config.json", dir / "config.json");
  Checkpoint ck = Checkpoint::open(src);
  SafetensorsWriter w;
  for (auto& name : ck.names()) {
    std::string renamed = name;
    if (name.rfind("model.", 0) == 0) renamed = "model.language_model." + name.substr(6);
    w.add(renamed, ck.get(name));
  }
  w.write(dir / "model.safetensors");
  auto backend = make_cpu_backend();
  auto original = load_model(src, *backend);
  auto renamed = load_model(dir, *backend);
  EXPECT_EQ(renamed->num_parameters(), original->num_parameters());
  std::filesystem::remove_all(dir);
}

}  // namespace gemma4_config_test
}  // namespace tandem::arch
