// ImageInput: one image of a request as the HTTP thread hands it to the engine — decoded,
// bounded and preprocessed exactly as the model's image processor would (media/), so the
// engine thread only encodes it. The request's prompt already holds the image's expanded
// placeholder run (begin, soft tokens, end); a MediaSpan says where its soft tokens are.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace tandem {

struct ImageInput {
  // f32 host tensor, the processor's pixel_values for this one image:
  //   Gemma 3: [3, H, W] (rescaled and normalized, channels first);
  //   Gemma 4: [num_patches, 3 * patch * patch] (the processor's patch order; padding
  //            patches are not included).
  Tensor pixels;
  // Gemma 4: [num_patches, 2] (x, y) patch positions, as the processor's
  // image_position_ids; empty for Gemma 3.
  std::vector<int32_t> position_ids;
  int num_soft_tokens = 0;  // the soft tokens the encoder makes for it
  // A hash of the decoded RGB pixels and their size (not of the file's bytes): the key of
  // the encoder cache and what the prefix cache mixes into the blocks the span falls in.
  uint64_t content_hash = 0;
};

// Where one image's soft tokens sit in a request's prompt: positions
// [start, start + length) hold its placeholder token, and length == image->num_soft_tokens.
struct MediaSpan {
  int32_t start = 0;
  int32_t length = 0;
  std::shared_ptr<const ImageInput> image;
};

}  // namespace tandem
