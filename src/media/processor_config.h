// ImageProcessorConfig: a model folder's image processor settings, read once at load.
//
// Where they live: transformers 5 writes processor_config.json with the image processor
// nested under "image_processor"; the Hub's folders keep it flat in preprocessor_config.json
// (processor_config.json then holds only processor-level keys such as image_seq_length).
// Both layouts are read; a key the config leaves out takes the processor class's default
// (Gemma3ImageProcessorPil / Gemma4ImageProcessorPil in transformers 5.17).
#pragma once

#include <array>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "media/resample.h"

namespace tandem {

enum class ImageProcessorKind { kGemma3, kGemma4 };

// Gemma 3's pan-and-scan: crops of a wide or tall image, each encoded beside the original.
struct PanAndScanConfig {
  bool enabled = false;
  int min_crop_size = 256;
  int max_num_crops = 4;
  double min_ratio_to_activate = 1.2;
};

struct ImageProcessorConfig {
  ImageProcessorKind kind = ImageProcessorKind::kGemma3;
  std::string source;  // the file the settings came from, for messages

  bool do_resize = true;
  ResampleFilter resample = ResampleFilter::kBilinear;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255;  // applied in double, then rounded to float32 (numpy)
  bool do_normalize = true;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};  // float32, as numpy casts them
  std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};

  // Gemma 3: every image (and crop) is resized to height × width and yields
  // image_seq_length soft tokens (the processor's, else config.json's mm_tokens_per_image).
  int height = 224;
  int width = 224;
  int image_seq_length = 256;
  PanAndScanConfig pan_and_scan;

  // Gemma 4: an aspect-preserving size within max_soft_tokens × pooling² patches of
  // patch_size², each side a multiple of pooling × patch_size.
  int patch_size = 16;
  int max_soft_tokens = 280;
  int pooling_kernel_size = 3;
};

// Reads the folder's processor files (and config.json for mm_tokens_per_image); throws
// MediaError(kConfig) naming the file and key on anything it cannot use.
ImageProcessorConfig read_image_processor_config(const std::filesystem::path& model_dir);

// The same from parsed JSON: `image_processor` holds the image processor's keys,
// `processor` the processor-level ones, `model` config.json (each may be an empty object).
ImageProcessorConfig parse_image_processor_config(const nlohmann::json& image_processor,
                                                  const nlohmann::json& processor,
                                                  const nlohmann::json& model,
                                                  const std::string& source);

// Reads a JSON file; an absent file is an empty object. Throws MediaError(kConfig).
nlohmann::json read_json_or_empty(const std::filesystem::path& path);

}  // namespace tandem
