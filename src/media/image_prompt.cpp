#include "media/image_prompt.h"

#include <nlohmann/json.hpp>

#include "media/media_error.h"

namespace tandem {
namespace {

// A special token as tokenizer_config.json writes it: a string, or an AddedToken object.
std::optional<std::string> token_string(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

std::string named_token(const nlohmann::json& tokenizer, const char* name,
                        const std::string& fallback) {
  if (tokenizer.contains(name)) {
    if (auto s = token_string(tokenizer[name])) return *s;
  }
  if (!tokenizer.is_object() || !tokenizer.contains("extra_special_tokens")) return fallback;
  const nlohmann::json& extra = tokenizer["extra_special_tokens"];
  if (extra.is_object() && extra.contains(name)) {
    if (auto s = token_string(extra[name])) return *s;
  }
  return fallback;
}

// config.json's id for "boi"/"image"/"eoi": Gemma 3 writes <name>_token_index, Gemma 4
// <name>_token_id.
std::optional<int32_t> token_id(const nlohmann::json& model, const std::string& name) {
  for (const char* suffix : {"_token_id", "_token_index"}) {
    const std::string key = name + suffix;
    if (!model.contains(key) || !model[key].is_number_integer()) continue;
    const int64_t id = model[key].get<int64_t>();
    if (id >= 0 && id <= INT32_MAX) return int32_t(id);
  }
  return std::nullopt;
}

std::string image_run(const ImagePromptSpec& spec, int num_soft_tokens) {
  std::string out = spec.around + spec.begin;
  out.reserve(out.size() + spec.soft.size() * size_t(num_soft_tokens) + 64);
  for (int i = 0; i < num_soft_tokens; ++i) out += spec.soft;
  out += spec.end + spec.around;
  return out;
}

}  // namespace

ImagePromptSpec parse_image_prompt_spec(const nlohmann::json& tokenizer,
                                        const nlohmann::json& model, ImageProcessorKind kind) {
  ImagePromptSpec s;
  s.kind = kind;
  const bool gemma3 = kind == ImageProcessorKind::kGemma3;
  s.begin = named_token(tokenizer, "boi_token", gemma3 ? "<start_of_image>" : "<|image>");
  s.soft = named_token(tokenizer, "image_token", gemma3 ? "<image_soft_token>" : "<|image|>");
  s.end = named_token(tokenizer, "eoi_token", gemma3 ? "<end_of_image>" : "<image|>");
  // Gemma3Processor's image_token is the boi token: the template writes that.
  s.marker = gemma3 ? s.begin : s.soft;
  s.around = gemma3 ? "\n\n" : "";
  s.begin_id = token_id(model, "boi");
  s.soft_id = token_id(model, "image");
  s.end_id = token_id(model, "eoi");
  return s;
}

ImagePromptSpec read_image_prompt_spec(const std::filesystem::path& model_dir,
                                       ImageProcessorKind kind) {
  return parse_image_prompt_spec(read_json_or_empty(model_dir / "tokenizer_config.json"),
                                 read_json_or_empty(model_dir / "config.json"), kind);
}

std::string image_prompt_text(const ImagePromptSpec& spec, std::span<const int> soft_tokens) {
  TANDEM_CHECK(!soft_tokens.empty(), "an image has at least one part");
  if (soft_tokens.size() == 1) return image_run(spec, soft_tokens[0]);
  // Gemma3Processor.replace_image_token, crops present.
  std::string out = "Here is the original image " + image_run(spec, soft_tokens[0]) +
                    " and here are some crops to help you see better ";
  for (size_t i = 1; i < soft_tokens.size(); ++i) {
    if (i > 1) out += " ";
    out += image_run(spec, soft_tokens[i]);
  }
  return out;
}

}  // namespace tandem
