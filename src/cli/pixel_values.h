// `--pixel-values FILE.safetensors` (tandem logits, tandem generate): the images of an id
// sequence as a processor already made them, until `--image FILE` reads image files
// through the media module. The file holds, for image j in prompt order,
// `pixel_values.j` (Gemma 3 [3, H, W]; Gemma 4 [num_patches, 3·p²]) and, for Gemma 4,
// `image_position_ids.j` [num_patches, 2] (i32). Image j's soft tokens are the j-th run of
// the model's image token in the ids.
#pragma once

#include <filesystem>
#include <span>
#include <vector>

#include "engine/request.h"
#include "model/vision/vision_spec.h"

namespace tandem::cli {

// Throws tandem::Error naming the file and the tensor, or the id run, that does not fit.
std::vector<MediaSpan> media_from_pixel_values(const std::filesystem::path& file,
                                               std::span<const int32_t> ids,
                                               const VisionSpec& vision);

}  // namespace tandem::cli
