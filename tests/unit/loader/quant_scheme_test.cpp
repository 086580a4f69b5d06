// config.json's quantization_config: the FP8 layouts tandem reads, and a clear error naming
// the field for everything else.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/quant_scheme.h"

namespace tandem {
namespace quant_scheme_test {

using json = nlohmann::json;

json compressed(const std::string& weights, const json& inputs) {
  return {{"quantization_config",
           {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"}, {"ignore", {"lm_head"}},
            {"config_groups",
             {{"group_0",
               {{"targets", {"Linear"}},
                {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", weights}, {"symmetric", true}}},
                {"input_activations", inputs}}}}}}}};
}

std::string error_of(const json& config) {
  try {
    parse_quantization_config(config, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(QuantScheme, ReadsTheFp8Layouts) {
  EXPECT_FALSE(parse_quantization_config(json{{"model_type", "llama"}}, "c").fp8());
  const json dynamic = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}};
  QuantScheme s = parse_quantization_config(compressed("channel", dynamic), "c");
  EXPECT_EQ(s.source, QuantScheme::Source::Checkpoint);
  EXPECT_EQ(s.weights, Fp8Weights::PerChannel);
  EXPECT_EQ(s.inputs, Fp8Inputs::Dynamic);
  EXPECT_EQ(s.ignore, std::vector<std::string>{"lm_head"});
  const json fixed = {{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}};
  s = parse_quantization_config(compressed("tensor", fixed), "c");
  EXPECT_EQ(s.weights, Fp8Weights::PerTensor);
  EXPECT_EQ(s.inputs, Fp8Inputs::Static);
  s = parse_quantization_config(
      json{{"quantization_config", {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}}}}, "c");
  EXPECT_EQ(s.weights, Fp8Weights::Block);
  EXPECT_EQ(s.block_n, 128);
  EXPECT_EQ(s.block_k, 128);
  s = parse_quantization_config(
      json{{"quantization_config", {{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"modules_to_not_convert", {"lm_head"}}}}}, "c");
  EXPECT_EQ(s.weights, Fp8Weights::PerTensor);
  EXPECT_EQ(s.inputs, Fp8Inputs::Static);
  EXPECT_EQ(s.method, "fp8");
  EXPECT_NE(s.describe("bf16").find("per-tensor"), std::string::npos);
}

TEST(QuantScheme, NamesTheFieldItRefuses) {
  EXPECT_NE(error_of(json{{"quantization_config", {{"quant_method", "awq"}}}}).find("quant_method 'awq'"), std::string::npos);
  EXPECT_NE(error_of(json{{"quantization_config", {{"quant_method", "fp8"}, {"fmt", "e5m2"}}}}).find("fmt 'e5m2'"), std::string::npos);
  const json dynamic = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}};
  json int8 = compressed("channel", dynamic);
  int8["quantization_config"]["config_groups"]["group_0"]["weights"]["type"] = "int";
  EXPECT_NE(error_of(int8).find("weights.type"), std::string::npos);
  EXPECT_NE(error_of(compressed("group", dynamic)).find("weights.strategy 'group'"), std::string::npos);
  EXPECT_NE(error_of(compressed("channel", nullptr)).find("W8A16"), std::string::npos);
}

TEST(QuantScheme, OnlineAndResolution) {
  EXPECT_FALSE(online_quantization(std::nullopt).has_value());
  EXPECT_FALSE(online_quantization("none").has_value());
  EXPECT_THROW(online_quantization("int4"), Error);
  auto online = online_quantization("fp8");
  ASSERT_TRUE(online.has_value());
  EXPECT_EQ(resolve_quantization(QuantScheme{}, online).source, QuantScheme::Source::Online);
  QuantScheme ck{.source = QuantScheme::Source::Checkpoint, .method = "fp8"};
  EXPECT_EQ(resolve_quantization(ck, online).source, QuantScheme::Source::Checkpoint);
  EXPECT_TRUE(quantizable_weight_name("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(quantizable_weight_name("lm_head.weight"));
  EXPECT_FALSE(quantizable_weight_name("model.layers.0.mlp.gate.weight"));
  EXPECT_TRUE(quantizable_weight_name("model.layers.0.mlp.experts.3.up_proj.weight"));
  EXPECT_TRUE(quantizable_weight_name("model.layers.0.block_sparse_moe.experts.3.w2.weight"));
  EXPECT_FALSE(quantizable_weight_name("model.layers.0.block_sparse_moe.gate.weight"));
  EXPECT_FALSE(quantizable_weight_name("model.layers.0.w2.weight"));
  EXPECT_EQ(scale_tensor_name("a.q_proj.weight", "weight_scale"), "a.q_proj.weight_scale");
}

}  // namespace quant_scheme_test
}  // namespace tandem
