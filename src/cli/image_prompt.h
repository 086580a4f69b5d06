// `tandem generate --image FILE` (repeatable): image files into a request through the
// server's image pipeline (server/common/request_images.h), so the command line sees
// exactly what the chat API sees: each file bounded, decoded and preprocessed by the
// folder's image processor, its marker expanded in the prompt, one MediaSpan per image.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "model/vision/vision_spec.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

struct ImagePrompt {
  std::vector<int32_t> ids;      // the prompt, each image's soft tokens in place
  std::vector<MediaSpan> media;  // one per image part, in order
};

struct ImageFiles {
  std::filesystem::path model_dir;      // holds the image processor's config
  std::filesystem::path tokenizer_dir;  // holds the chat template (--tokenizer, or the model)
  std::shared_ptr<const Tokenizer> tokenizer;
  VisionSpec vision;               // the loaded model's
  std::vector<std::string> files;  // --image, in order
};

// --prompt TEXT: one user message holding the images, then the text, rendered by the
// model's chat template with the generation prompt (as a chat request with image parts).
// Throws tandem::Error naming the file ("--image F: ...") or the reason.
ImagePrompt chat_image_prompt(const ImageFiles& images, const std::string& text);

// --ids: ids whose image-token runs are expanded already (as a processor writes them); the
// files fill the runs in order, and must match them in number and soft-token count.
std::vector<MediaSpan> image_spans_for_ids(const ImageFiles& images, std::span<const int32_t> ids);

}  // namespace tandem::cli
