#include "media/image_processor.h"

#include "media/preprocess.h"

namespace tandem {

int ProcessedImage::num_soft_tokens() const {
  int n = 0;
  for (const auto& part : parts) n += part->num_soft_tokens;
  return n;
}

ImageProcessor ImageProcessor::load(const std::filesystem::path& model_dir) {
  ImageProcessorConfig config = read_image_processor_config(model_dir);
  ImagePromptSpec spec = read_image_prompt_spec(model_dir, config.kind);
  return ImageProcessor(std::move(config), std::move(spec));
}

ImageProcessor::ImageProcessor(ImageProcessorConfig config, ImagePromptSpec prompt_spec)
    : config_(std::move(config)), prompt_spec_(std::move(prompt_spec)) {}

ProcessedImage ImageProcessor::process(std::span<const uint8_t> bytes,
                                       const MediaLimits& limits) const {
  const DecodedImage decoded = decode_image(bytes, limits);
  ProcessedImage out = process(decoded.rgb);
  out.format = decoded.format;
  return out;
}

ProcessedImage ImageProcessor::process(const RgbImage& image) const {
  ProcessedImage out;
  out.width = image.width;
  out.height = image.height;
  auto add = [&](ImageInput input) {
    out.parts.push_back(std::make_shared<const ImageInput>(std::move(input)));
  };
  if (config_.kind == ImageProcessorKind::kGemma4) {
    add(media_detail::preprocess_gemma4(image, config_));
    return out;
  }
  add(media_detail::preprocess_gemma3(image, config_));
  if (config_.pan_and_scan.enabled) {
    for (const RgbImage& crop : media_detail::pan_and_scan_crops(image, config_.pan_and_scan)) {
      add(media_detail::preprocess_gemma3(crop, config_));
    }
  }
  return out;
}

std::string ImageProcessor::prompt_text(const ProcessedImage& image) const {
  std::vector<int> soft_tokens;
  for (const auto& part : image.parts) soft_tokens.push_back(part->num_soft_tokens);
  return image_prompt_text(prompt_spec_, soft_tokens);
}

}  // namespace tandem
