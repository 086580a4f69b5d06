#include "server/common/served_model.h"

#include <fstream>

#include "core/error.h"

namespace tandem::server {
namespace {

template <typename T>
void read_number(const nlohmann::json& j, const char* key, T& out, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number()) fail("{}: \"{}\" must be a number, got {}", file, key, it->dump());
  out = it->get<T>();
}

// Whether the model encodes images is the model's to say (ModelInfo::vision, its vision
// tower); the processor files must agree with it on the placeholder id.
ServedImages served_images_of(const std::filesystem::path& dir, const Tokenizer& tokenizer,
                              const VisionSpec& vision) {
  ServedImages images = load_served_images(dir, tokenizer, vision.takes_images, vision.refusal);
  if (images.takes_images && images.soft_token_id != vision.image_token_id)
    fail("{}: the image processor's placeholder id {} is not the model's image_token_id {}",
         dir.string(), images.soft_token_id, vision.image_token_id);
  return images;
}

}  // namespace

SamplingParams read_generation_defaults(const std::filesystem::path& dir) {
  SamplingParams s;
  std::filesystem::path path = dir / "generation_config.json";
  std::ifstream in(path);
  if (!in) return s;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail("{}: invalid JSON", path.string());
  read_number(j, "temperature", s.temperature, path.string());
  read_number(j, "top_p", s.top_p, path.string());
  read_number(j, "top_k", s.top_k, path.string());
  read_number(j, "min_p", s.min_p, path.string());
  read_number(j, "repetition_penalty", s.repetition_penalty, path.string());
  return s;
}

bool accepts_model_name(const ServedModel& model, const std::string& served_name,
                        std::string_view requested) {
  if (requested == served_name) return true;
  if (!model.engine) return false;
  for (auto& [name, dir] : model.engine->lora_adapters())
    if (requested == name) return true;
  return false;
}

ServedModel load_served_model(const std::filesystem::path& dir, EngineApi& engine,
                              std::shared_ptr<const Tokenizer> tokenizer,
                              const ServedModelOptions& options) {
  ServedModel m;
  m.engine = &engine;
  m.tokenizer = tokenizer ? std::move(tokenizer) : Tokenizer::load(dir);
  const TokenizerConfig config = TokenizerConfig::load(dir);
  m.chat = ChatPromptBuilder::create(config, m.tokenizer);
  m.defaults.sampling = read_generation_defaults(dir);
  m.grammars = make_grammar_cache(*m.tokenizer, engine.model_info(), options.grammar);
  m.tool_format = tool_call_format_of(config.chat_template);
  m.images = served_images_of(dir, *m.tokenizer, engine.model_info().vision);
  std::optional<std::string> chat_template = config.chat_template;
  if (auto tool = config.named_templates.find("tool_use");
      !chat_template && tool != config.named_templates.end())
    chat_template = tool->second;
  m.reasoning =
      served_reasoning(options.reasoning_parser, *m.tokenizer, engine.model_info(), chat_template);
  std::ifstream tokenizer_json(std::filesystem::is_directory(dir) ? dir / "tokenizer.json" : dir);
  if (tokenizer_json) {
    nlohmann::json tj = nlohmann::json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
    m.prompt_bound = PromptBound::from_tokenizer(tj, *m.tokenizer);
  }
  return m;
}

}  // namespace tandem::server
