// Multimodal config.json files as published: a sparse Hub text_config gets HF's text config
// defaults (Gemma 3's layer pattern from sliding_window_pattern, its RoPE per layer type),
// top-level fields reach the text model when text_config lacks them, and the towers'
// configs and token ids parse with their defaults; images are checked against the geometry.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/vision/gemma4_vision.h"
#include "model/vision/image_check.h"
#include "model/vision/siglip.h"

namespace tandem {
namespace multimodal_config_test {

using json = nlohmann::json;

// google/gemma-3-4b-it's config.json (its text_config is sparse).
json hub_gemma3() {
  return json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
    "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}})");
}

TEST(MultimodalConfig, ASparseGemma3TextConfigGetsHfDefaults) {
  const ModelConfig c = ModelConfig::parse(hub_gemma3(), "config.json");
  EXPECT_EQ(c.multimodal_type, "gemma3");
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.activation, Activation::GeluTanh);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 106}));  // the top level's
  ASSERT_EQ(c.layer_kinds.size(), 34u);
  for (int i = 0; i < 34; i++)  // every sixth layer is full
    EXPECT_EQ(c.layer_kinds[size_t(i)], (i + 1) % 6 ? LayerKind::Sliding : LayerKind::Full) << i;
  EXPECT_EQ(c.rope_for(5).type, "linear");  // the scaling is the full layers'
  EXPECT_DOUBLE_EQ(c.rope_for(5).theta, 1e6);
  EXPECT_EQ(c.rope_for(0).type, "default");
  EXPECT_DOUBLE_EQ(c.rope_for(0).theta, 1e4);
  EXPECT_EQ(c.raw().value("torch_dtype", ""), "bfloat16");
}

TEST(MultimodalConfig, SiglipConfigTakesItsDefaultsAndTheTopLevelIds) {
  const SiglipConfig s = parse_siglip_config(ModelConfig::parse(hub_gemma3(), "config.json"));
  EXPECT_EQ(s.hidden_size, 1152);
  EXPECT_EQ(s.num_layers, 27);
  EXPECT_EQ(s.patches_per_side(), 64);
  EXPECT_EQ(s.tokens_per_side(), 16);
  EXPECT_FLOAT_EQ(s.layer_norm_eps, 1e-6f);
  EXPECT_EQ(s.image_token_id, 262144);
  EXPECT_EQ(s.boi_token_id, 255999);
  EXPECT_EQ(s.eoi_token_id, 256000);
}

TEST(MultimodalConfig, AMissingOrMalformedVisionConfigMeansHfDefaults) {
  const SiglipConfig defaults;
  for (const json& vision : {json(), json("not an object"), json::array({1, 2})}) {
    json j = hub_gemma3();
    if (vision.is_null())
      j.erase("vision_config");
    else
      j["vision_config"] = vision;
    j["mm_tokens_per_image"] = 49;  // 7 a side divides the defaults' 224 / 16 = 14 patches
    const SiglipConfig s = parse_siglip_config(ModelConfig::parse(j, "config.json"));
    EXPECT_EQ(s.hidden_size, defaults.hidden_size) << vision.dump();
    EXPECT_EQ(s.num_layers, defaults.num_layers) << vision.dump();
    EXPECT_EQ(s.image_size, defaults.image_size) << vision.dump();
    EXPECT_EQ(s.image_token_id, 262144) << vision.dump();  // the top level is still read
  }
}

TEST(MultimodalConfig, BadGeometryIsRefusedNamingTheField) {
  json j = hub_gemma3();
  j["mm_tokens_per_image"] = 200;  // not a square
  EXPECT_THROW(parse_siglip_config(ModelConfig::parse(j, "config.json")), Error);
  j = hub_gemma3();
  j["vision_config"]["patch_size"] = 13;  // 896 is not a multiple
  EXPECT_THROW(parse_siglip_config(ModelConfig::parse(j, "config.json")), Error);
  j = hub_gemma3();
  j["model_type"] = "llava";
  try {
    ModelConfig::parse(j, "config.json");
    ADD_FAILURE() << "a llava text_config was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llava"), std::string::npos) << e.what();
  }
}

TEST(MultimodalConfig, Gemma4VisionReadsBidirectionalAttentionFromTheTextConfig) {
  json j = {{"model_type", "gemma4"},
            {"text_config",
             {{"vocab_size", 300000},
              {"hidden_size", 64},
              {"num_hidden_layers", 6},
              {"num_attention_heads", 4},
              {"use_bidirectional_attention", "vision"}}},
            {"vision_config", {{"hidden_size", 32}, {"head_dim", 16}}}};
  Gemma4VisionConfig g = parse_gemma4_vision_config(ModelConfig::parse(j, "config.json"));
  EXPECT_TRUE(g.bidirectional);
  EXPECT_EQ(g.image_token_id, 258880);
  EXPECT_EQ(g.pooling_kernel_size, 3);
  EXPECT_DOUBLE_EQ(g.rope_theta, 100.0);
  j["text_config"].erase("use_bidirectional_attention");
  EXPECT_FALSE(parse_gemma4_vision_config(ModelConfig::parse(j, "config.json")).bidirectional);
  j["vision_config"]["head_dim"] = 18;  // its halves would not be even
  EXPECT_THROW(parse_gemma4_vision_config(ModelConfig::parse(j, "config.json")), Error);
}

VisionSpec gemma4_spec() {
  VisionSpec s;
  s.takes_images = true;
  s.family = VisionFamily::Gemma4;
  s.patch_size = 2;
  s.pooling_kernel_size = 2;
  s.max_patch_position = 16;
  return s;
}

// A grid of w × h patches, row-major, 2 × 2 cells.
ImageInput patches(int w, int h) {
  ImageInput im;
  im.pixels = Tensor::empty_host(DType::F32, {int64_t(w) * h, 12});
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) im.position_ids.insert(im.position_ids.end(), {x, y});
  im.num_soft_tokens = w * h / 4;
  return im;
}

TEST(ImageCheck, Gemma4PatchesMustFillTheirCells) {
  const VisionSpec s = gemma4_spec();
  EXPECT_EQ(check_image(s, patches(4, 6)), std::nullopt);
  ImageInput odd = patches(3, 4);  // a column of half-filled cells
  odd.num_soft_tokens = 3;
  EXPECT_NE(check_image(s, odd), std::nullopt);
  ImageInput far = patches(4, 4);
  far.position_ids[1] = 16;  // past the position table
  EXPECT_NE(check_image(s, far), std::nullopt);
  ImageInput twice = patches(4, 4);
  twice.position_ids[2] = 0;  // patch 1 repeats patch 0's position
  EXPECT_NE(check_image(s, twice), std::nullopt);
  ImageInput count = patches(4, 4);
  count.num_soft_tokens = 5;
  EXPECT_NE(check_image(s, count), std::nullopt);
  VisionSpec none;
  none.refusal = "no towers";
  EXPECT_EQ(check_image(none, patches(4, 4)), std::optional<std::string>("no towers"));
}

}  // namespace multimodal_config_test
}  // namespace tandem
