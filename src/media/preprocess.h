// The two HF image processors' per-image steps (internal to media/; ImageProcessor is the
// interface). Exposed in a header for the unit tests of their size rules.
#pragma once

#include <utility>
#include <vector>

#include "media/image_input.h"
#include "media/processor_config.h"
#include "media/rgb_image.h"

namespace tandem::media_detail {

// Gemma3ImageProcessorPil.pan_and_scan: the crops of a wide or tall image (none when the
// aspect is below the ratio or a crop would be under min_crop_size), row-major.
std::vector<RgbImage> pan_and_scan_crops(const RgbImage& image, const PanAndScanConfig& config);

// Gemma 3, one image or crop: resize to height × width, rescale, normalize, channels first.
// pixels [3, height, width]; num_soft_tokens = image_seq_length; no position ids.
ImageInput preprocess_gemma3(const RgbImage& image, const ImageProcessorConfig& config);

// Gemma 4's get_aspect_ratio_preserving_size: (height, width); throws MediaError(kInvalid)
// where transformers raises (an aspect too extreme for the budget).
std::pair<int, int> gemma4_target_size(int height, int width, const ImageProcessorConfig& config);

// Gemma 4, one image: resize to its target size (bicubic by default), rescale, patchify.
// pixels [num_patches, 3·p·p] in the processor's order (patch rows top to bottom, each patch
// dy, dx, channel); position_ids [num_patches, 2] (x, y); num_soft_tokens =
// num_patches / pooling². The processor's padding patches (position -1) are not included.
ImageInput preprocess_gemma4(const RgbImage& image, const ImageProcessorConfig& config);

}  // namespace tandem::media_detail
