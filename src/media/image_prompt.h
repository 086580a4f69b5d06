// ImagePromptSpec: how an image appears in the prompt, for the server's prompt expansion.
//
// The chat template renders each {"type": "image"} item as `marker`; before tokenizing, the
// server replaces each marker with image_prompt_text(...) of that image (ImageProcessor::
// prompt_text), then finds the runs of soft_id in the token ids: one run per ImageInput
// part, in order, each num_soft_tokens long (a MediaSpan each).
//   Gemma 3: marker "<start_of_image>" -> "\n\n<start_of_image>" + soft × n +
//            "<end_of_image>\n\n" (pan-and-scan: a sentence introducing the original and the
//            crops, Gemma3Processor's wording).
//   Gemma 4: marker "<|image|>" -> "<|image>" + "<|image|>" × n + "<image|>".
// The token strings come from tokenizer_config.json (boi_token, image_token, eoi_token,
// top-level or under extra_special_tokens), the ids from config.json (Gemma 3's
// *_token_index, Gemma 4's *_token_id) when it names them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "media/processor_config.h"

namespace tandem {

struct ImagePromptSpec {
  ImageProcessorKind kind = ImageProcessorKind::kGemma3;
  std::string marker;  // what the chat template writes for an image
  std::string begin;   // boi_token
  std::string soft;    // image_token: the placeholder the soft tokens replace
  std::string end;     // eoi_token
  std::string around;  // text on both sides of each image's run ("\n\n" for Gemma 3)
  std::optional<int32_t> begin_id, soft_id, end_id;  // from config.json, when present
};

ImagePromptSpec read_image_prompt_spec(const std::filesystem::path& model_dir,
                                       ImageProcessorKind kind);
// The same from parsed tokenizer_config.json and config.json (either may be empty).
ImagePromptSpec parse_image_prompt_spec(const nlohmann::json& tokenizer_config,
                                        const nlohmann::json& model_config,
                                        ImageProcessorKind kind);

// The text replacing one image's marker: `soft_tokens[0]` for the image itself, then one
// entry per pan-and-scan crop (Gemma 3 only).
std::string image_prompt_text(const ImagePromptSpec& spec, std::span<const int> soft_tokens);

}  // namespace tandem
