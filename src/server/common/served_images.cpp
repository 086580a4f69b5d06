#include "server/common/served_images.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "media/media_error.h"

namespace tandem::server {
namespace {

bool has_processor_files(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "processor_config.json") ||
         std::filesystem::exists(dir / "preprocessor_config.json");
}

const char* kind_name(ImageProcessorKind kind) {
  return kind == ImageProcessorKind::kGemma3 ? "Gemma 3" : "Gemma 4";
}

std::string tokens_per_image(const ImageProcessorConfig& c) {
  if (c.kind == ImageProcessorKind::kGemma3)
    return fmt::format("{} tokens per image", c.image_seq_length);
  return fmt::format("up to {} tokens per image", c.max_soft_tokens);
}

// The placeholder's id: config.json's, else the tokenizer's for its text.
int32_t soft_token_id(const ImageProcessor& p, const Tokenizer& tokenizer) {
  const ImagePromptSpec& spec = p.prompt_spec();
  if (spec.soft_id) return *spec.soft_id;
  if (auto id = tokenizer.token_to_id(spec.soft)) return *id;
  throw Error(fmt::format("{}: the image placeholder token '{}' is not in the tokenizer",
                          p.config().source, spec.soft));
}

}  // namespace

Json ServedImages::card() const {
  Json out = {{"takes_images", takes_images}};
  if (!takes_images) out["reason"] = refusal;
  if (processor) {
    out["processor"] = kind_name(processor->config().kind);
    out["tokens_per_image"] = processor->config().kind == ImageProcessorKind::kGemma3
                                  ? processor->config().image_seq_length
                                  : processor->config().max_soft_tokens;
  }
  return out;
}

std::string ServedImages::summary() const {
  if (!takes_images) return fmt::format("no ({})", refusal);
  return fmt::format("yes ({} processor, {})", kind_name(processor->config().kind),
                     tokens_per_image(processor->config()));
}

ServedImages load_served_images(const std::filesystem::path& dir, const Tokenizer& tokenizer,
                                bool model_takes_images, const std::string& model_refusal) {
  ServedImages out;
  out.refusal = "this model takes text only";
  if (!std::filesystem::is_directory(dir) || !has_processor_files(dir)) {
    if (model_takes_images)
      throw Error(
          fmt::format("{}: the model takes images, but the folder has no "
                      "processor_config.json or preprocessor_config.json",
                      dir.string()));
    return out;
  }
  if (!model_refusal.empty()) out.refusal = model_refusal;
  try {
    out.processor = std::make_shared<const ImageProcessor>(ImageProcessor::load(dir));
    out.soft_token_id = soft_token_id(*out.processor, tokenizer);
  } catch (const Error& e) {
    if (model_takes_images) throw;
    out.processor.reset();
    out.refusal += fmt::format("; its image processor does not load: {}", e.what());
    return out;
  }
  out.takes_images = model_takes_images;
  if (out.takes_images) out.refusal.clear();
  return out;
}

}  // namespace tandem::server
