// ImageProcessor: a model's image preprocessing, as its Hugging Face image processor (PIL
// backend, transformers 5.17) does it, on the HTTP thread:
//
//   ImageProcessor proc = ImageProcessor::load(model_dir);          // once, at model load
//   ProcessedImage img = proc.process(bytes, limits);               // per image part
//   prompt.replace(marker_at, proc.prompt_spec().marker.size(), proc.prompt_text(img));
//   // after tokenizing: one MediaSpan per img.parts[i], over its run of soft tokens
//
// Gemma 3 (Gemma3ImageProcessorPil): resize to the configured size (bilinear), rescale,
// normalize, channels first, image_seq_length soft tokens; with do_pan_and_scan on, the
// crops follow the image as further parts (each its own run of soft tokens).
// Gemma 4 (Gemma4ImageProcessorPil): the aspect-preserving size for max_soft_tokens
// (bicubic), rescale, patches in the processor's order with their (x, y) positions;
// num_patches / pooling² soft tokens.
//
// Pan-and-scan note: Gemma3Processor's call defaults (do_pan_and_scan False) take priority
// over the image processor's saved config in transformers, so there it happens only when
// the caller asks; tandem takes do_pan_and_scan: true in the config as that request.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "media/image_decode.h"
#include "media/image_input.h"
#include "media/image_prompt.h"
#include "media/media_limits.h"
#include "media/processor_config.h"

namespace tandem {

// One image of a request, preprocessed.
struct ProcessedImage {
  // The encoder's inputs in prompt order: the image, then its pan-and-scan crops (Gemma 3).
  std::vector<std::shared_ptr<const ImageInput>> parts;
  int width = 0;   // the decoded image's size, after EXIF orientation
  int height = 0;
  ImageFormat format = ImageFormat::kUnknown;

  int num_crops() const { return int(parts.size()) - 1; }
  int num_soft_tokens() const;  // over all parts
};

class ImageProcessor {
 public:
  // Reads processor_config.json / preprocessor_config.json, tokenizer_config.json and
  // config.json; throws MediaError(kConfig) when the folder has no usable image processor.
  static ImageProcessor load(const std::filesystem::path& model_dir);
  ImageProcessor(ImageProcessorConfig config, ImagePromptSpec prompt_spec);

  const ImageProcessorConfig& config() const { return config_; }
  const ImagePromptSpec& prompt_spec() const { return prompt_spec_; }

  // Decodes (decode_image, under `limits`) and preprocesses; throws MediaError.
  ProcessedImage process(std::span<const uint8_t> bytes, const MediaLimits& limits) const;
  // Preprocesses an already decoded image.
  ProcessedImage process(const RgbImage& image) const;

  // The text that replaces the image's marker in the rendered prompt.
  std::string prompt_text(const ProcessedImage& image) const;

 private:
  ImageProcessorConfig config_;
  ImagePromptSpec prompt_spec_;
};

}  // namespace tandem
