// `tandem random-model` for the Gemma family. Gemma 4: the presets resolve to the intended
// per-layer shapes, and a random checkpoint of a small config (every option on) holds
// exactly the tensors the gemma4_text model loads, and runs. Multimodal Gemma 3: the
// presets resolve to the Hub's gemma-3-4b/12b shapes, and the tiny preset's folder
// round-trips its config, holds exactly what the model loads, tokenizes the image tokens at
// the config's ids, and answers an image request through the engine.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/image_prompt.h"
#include "cli/random_model_gemma3.h"
#include "cli/random_model_gemma4.h"
#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "loader/checkpoint.h"
#include "media/png_encode.h"
#include "model/arch/gemma4_config.h"
#include "model/config.h"
#include "model/model.h"
#include "model/vision/siglip.h"

namespace tandem::cli {
namespace gemma_random_model_test {

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

TEST(Gemma3RandomModel, PresetsAreTheHubShapes) {
  const ModelConfig c = ModelConfig::parse(*gemma3_preset("gemma-3-12b"), "gemma-3-12b");
  EXPECT_EQ(c.multimodal_type, "gemma3");
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.hidden_size, 3840);
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.intermediate_size, 15360);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  ASSERT_EQ(c.layer_kinds.size(), 48u);
  EXPECT_EQ(c.layer_kinds[4], LayerKind::Sliding);
  EXPECT_EQ(c.layer_kinds[5], LayerKind::Full);  // 5 sliding : 1 global
  EXPECT_EQ(c.rope.at(LayerKind::Full).theta, 1e6);
  EXPECT_EQ(c.rope.at(LayerKind::Full).factor, 8.0);
  EXPECT_EQ(c.rope.at(LayerKind::Sliding).theta, 1e4);
  EXPECT_EQ(c.rope.at(LayerKind::Sliding).factor, 1.0);
  const SiglipConfig v = parse_siglip_config(c);
  EXPECT_EQ(v.hidden_size, 1152);
  EXPECT_EQ(v.num_layers, 27);
  EXPECT_EQ(v.num_heads, 16);
  EXPECT_EQ(v.intermediate_size, 4304);
  EXPECT_EQ(v.image_size, 896);
  EXPECT_EQ(v.patch_size, 14);
  EXPECT_EQ(v.mm_tokens_per_image, 256);
  EXPECT_EQ(v.image_token_id, 262144);
  EXPECT_EQ(v.boi_token_id, 255999);

  const ModelConfig small = ModelConfig::parse(*gemma3_preset("gemma-3-4b"), "gemma-3-4b");
  EXPECT_EQ(small.hidden_size, 2560);
  EXPECT_EQ(small.num_layers, 34);
  EXPECT_EQ(small.num_kv_heads, 4);
  EXPECT_EQ(parse_siglip_config(small).num_layers, 27);
  EXPECT_NE(random_model_presets().find("gemma-3-vision-tiny"), std::string::npos);
}

// One image request through the engine: its tokens and its finish reason.
std::pair<std::vector<int32_t>, std::optional<FinishReason>> run_request(Engine& engine,
                                                                         GenerationRequest r) {
  auto stream = engine.submit(std::move(r));
  engine.run_until_idle();
  std::pair<std::vector<int32_t>, std::optional<FinishReason>> out;
  while (auto c = stream->pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) out.first.push_back(t.token);
    if (c->finish) out.second = c->finish;
  }
  return out;
}

TEST(Gemma3RandomModel, TinyFolderAnswersAnImageRequest) {
  auto dir = std::filesystem::temp_directory_path() /
             ("tandem_gemma3_random_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  RandomModelOptions o;
  o.like = "gemma-3-vision-tiny";
  o.out = dir.string();
  ASSERT_EQ(run_random_model(o), 0);  // bf16, the default

  std::ifstream in(dir / "config.json");
  const json written = json::parse(in);
  const ModelConfig c = ModelConfig::parse(written, "written");
  const ModelConfig p = ModelConfig::parse(*gemma3_preset("gemma-3-vision-tiny"), "preset");
  EXPECT_EQ(c.multimodal_type, "gemma3");
  EXPECT_EQ(c.num_layers, p.num_layers);
  EXPECT_EQ(c.hidden_size, p.hidden_size);
  EXPECT_EQ(c.vocab_size, p.vocab_size);
  EXPECT_EQ(c.layer_kinds, p.layer_kinds);
  EXPECT_EQ(written.at("vision_config"), gemma3_preset("gemma-3-vision-tiny")->at("vision_config"));

  auto tokenizer = Tokenizer::load(dir);
  EXPECT_EQ(tokenizer->token_to_id("<start_of_image>"), written.at("boi_token_index").get<int>());
  EXPECT_EQ(tokenizer->token_to_id("<end_of_image>"), written.at("eoi_token_index").get<int>());
  EXPECT_EQ(tokenizer->token_to_id("<image_soft_token>"),
            written.at("image_token_index").get<int>());
  EXPECT_EQ(tokenizer->token_to_id("<bos>"), 2);

  Checkpoint ck = Checkpoint::open(dir);
  int64_t in_file = 0;
  for (auto& name : ck.names()) in_file += ck.get(name).numel();
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend);
  EXPECT_EQ(model->num_parameters(), in_file);  // nothing written that the model skips
  const VisionSpec vision = model->vision_spec();
  ASSERT_TRUE(vision.takes_images);
  EXPECT_EQ(vision.soft_tokens_per_image, 16);

  RgbImage picture(100, 80);
  for (size_t i = 0; i < picture.pixels.size(); i++) picture.pixels[i] = uint8_t(i * 7);
  const std::vector<uint8_t> png = encode_png(picture);
  std::ofstream(dir / "picture.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  const ImagePrompt prompt = chat_image_prompt(
      {dir, dir, tokenizer, vision, {(dir / "picture.png").string()}}, "What is in it?");
  ASSERT_EQ(prompt.media.size(), 1u);
  EXPECT_EQ(prompt.media[0].length, 16);
  EXPECT_EQ(prompt.ids[size_t(prompt.media[0].start) - 1], vision.boi_token_id);
  EXPECT_EQ(prompt.ids[0], 2);  // the template's <bos>

  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, EngineConfig{});
  GenerationRequest r;
  r.prompt = prompt.ids;
  r.media = prompt.media;
  r.max_tokens = 5;
  r.ignore_eos = true;
  const auto [tokens, finish] = run_request(engine, r);
  EXPECT_EQ(tokens.size(), 5u);
  EXPECT_EQ(finish, FinishReason::Length);
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.images_encoded_total, 1);
  ASSERT_TRUE(stats.vision_encode_ms_total.has_value());  // a CPU is timed as it runs
  EXPECT_GT(*stats.vision_encode_ms_total, 0.0);
  std::filesystem::remove_all(dir);
}

}  // namespace gemma_random_model_test
}  // namespace tandem::cli
