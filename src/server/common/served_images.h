// What the HTTP side knows about the served model's image input: whether the model takes
// images at all (and if not, why: the 400 says it), and how an image becomes prompt text
// and pixels (the folder's image processor, media/image_processor.h). /v1/models, /stats
// and the ready card report it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "media/image_processor.h"
#include "server/common/json_text.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct ServedImages {
  // Requests may carry images: the model encodes them (the engine's model says so) and the
  // folder has an image processor whose placeholder token the tokenizer knows.
  bool takes_images = false;
  std::string refusal;  // when not: why, for the 400 ("... takes text only", ...)
  std::shared_ptr<const ImageProcessor> processor;  // the folder's; null when it has none
  int32_t soft_token_id = -1;  // the placeholder id the soft tokens replace (of `processor`)

  // For /v1/models, /stats: {"takes_images": bool, "reason"?: why not, "processor"?: ...}.
  Json card() const;
  // One line for the ready card: "yes (Gemma 3 processor, 256 tokens per image)", "no (...)".
  std::string summary() const;
};

// Reads the folder's image processor (processor_config.json / preprocessor_config.json),
// when it has one. `model_takes_images` is the model's own word (it has a vision tower that
// runs) and `model_refusal` its reason when not. A folder whose model takes images must
// have a readable processor and a placeholder token the tokenizer knows (a tandem::Error
// naming the file otherwise); for a model that does not, a processor that does not read is
// only the reason given.
ServedImages load_served_images(const std::filesystem::path& dir, const Tokenizer& tokenizer,
                                bool model_takes_images, const std::string& model_refusal);

}  // namespace tandem::server
