#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/rope.h"

namespace tandem {
namespace config_test {

using json = nlohmann::json;

json base() {
  return {{"model_type", "llama"}, {"vocab_size", 100}, {"hidden_size", 64},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"intermediate_size", 128}};
}

std::string error_of(const json& j) {
  try {
    ModelConfig::parse(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsFollowHf) {
  ModelConfig c = ModelConfig::parse(base(), "config.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.layer_kinds.size(), 2u);
  EXPECT_EQ(c.rope_for(0).type, "default");
  EXPECT_DOUBLE_EQ(c.rope_for(0).theta, 10000.0);
}

TEST(Config, ReadsBothRopeSpellings) {
  json a = base();
  a["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  json b = base();
  b["rope_theta"] = 500000.0;
  b["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto ra = make_rope(ModelConfig::parse(a, "a").rope_for(0), 16, 4096);
  auto rb = make_rope(ModelConfig::parse(b, "b").rope_for(0), 16, 4096);
  EXPECT_EQ(ra.inv_freq, rb.inv_freq);
  EXPECT_EQ(ModelConfig::parse(b, "b").rope_for(0).type, "llama3");
}

TEST(Config, PerLayerTypeRope) {
  json j = base();
  j["layer_types"] = {"sliding_attention", "full_attention"};
  j["sliding_window"] = 8;
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  ModelConfig c = ModelConfig::parse(j, "c");
  EXPECT_EQ(c.window_for(0), 8);
  EXPECT_EQ(c.window_for(1), 0);
  EXPECT_DOUBLE_EQ(c.rope_for(0).theta, 1e4);
  EXPECT_DOUBLE_EQ(c.rope_for(1).theta, 1e6);
}

TEST(Config, SlidingWindowWithoutLayerTypesAppliesToAllLayers) {
  json j = base();
  j["sliding_window"] = 24;
  EXPECT_EQ(ModelConfig::parse(j, "m").window_for(1), 24);
  j["use_sliding_window"] = false;  // Qwen2's switch
  EXPECT_EQ(ModelConfig::parse(j, "q").window_for(1), 0);
}

TEST(Config, ImpossibleShapesNameTheField) {
  json j = base();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("num_key_value_heads"), std::string::npos);
  j = base();
  j["hidden_size"] = -1;
  EXPECT_NE(error_of(j).find("hidden_size"), std::string::npos);
  j = base();
  j["layer_types"] = {"full_attention"};
  EXPECT_NE(error_of(j).find("layer_types"), std::string::npos);
  j = base();
  j["vocab_size"] = "many";
  EXPECT_NE(error_of(j).find("vocab_size"), std::string::npos);
  j = base();
  j.erase("model_type");
  EXPECT_NE(error_of(j).find("model_type"), std::string::npos);
  j = base();
  j["rope_scaling"] = {{"rope_type", "warp"}};
  EXPECT_NE(error_of(j).find("warp"), std::string::npos);
}

// HF's llama3 rule: long wavelengths divided by factor, short ones kept, medium smoothed.
TEST(Rope, Llama3BandsFollowTheFormula) {
  RopeConfig r;
  r.type = "llama3";
  r.theta = 500000;
  r.factor = 8;
  r.original_max_position_embeddings = 8192;
  RopeSpec plain = make_rope(RopeConfig{.theta = 500000}, 128, 8192);
  RopeSpec s = make_rope(r, 128, 8192);
  const double pi = 3.14159265358979323846;
  for (size_t i = 0; i < s.inv_freq.size(); i++) {
    double wavelen = 2 * pi / plain.inv_freq[i];
    if (wavelen < 8192.0 / 4) EXPECT_FLOAT_EQ(s.inv_freq[i], plain.inv_freq[i]);
    else if (wavelen > 8192.0) EXPECT_FLOAT_EQ(s.inv_freq[i], plain.inv_freq[i] / 8);
    else EXPECT_TRUE(s.inv_freq[i] < plain.inv_freq[i] && s.inv_freq[i] > plain.inv_freq[i] / 8);
  }
}

TEST(Rope, LinearDividesAndYarnScalesAttention) {
  RopeConfig lin{.type = "linear", .theta = 10000, .factor = 4};
  RopeSpec plain = make_rope(RopeConfig{}, 64, 4096);
  RopeSpec l = make_rope(lin, 64, 4096);
  for (size_t i = 0; i < l.inv_freq.size(); i++) EXPECT_FLOAT_EQ(l.inv_freq[i], plain.inv_freq[i] / 4);
  RopeConfig yarn{.type = "yarn", .theta = 10000, .factor = 4};
  yarn.original_max_position_embeddings = 4096;
  RopeSpec y = make_rope(yarn, 64, 16384);
  EXPECT_NEAR(y.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_FLOAT_EQ(y.inv_freq[0], plain.inv_freq[0]);  // highest frequency: extrapolated
  EXPECT_NEAR(y.inv_freq.back(), plain.inv_freq.back() / 4, 1e-12);  // lowest: interpolated
}

TEST(Rope, PartialRotaryUsesTheLeadingDims) {
  RopeConfig r;
  r.partial_rotary_factor = 0.5;
  RopeSpec s = make_rope(r, 64, 4096);
  EXPECT_EQ(s.rotary_dim, 32);
  EXPECT_EQ(s.inv_freq.size(), 16u);
  EXPECT_FLOAT_EQ(s.inv_freq[1], float(1.0 / std::pow(10000.0, 2.0 / 32)));
}

}  // namespace config_test
}  // namespace tandem
