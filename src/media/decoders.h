// The per-format decoders behind decode_image (internal to media/). Each returns the frame
// already converted to RGB with PIL's semantics, plus the metadata that can carry an
// orientation; each throws MediaError on bad input and checks the pixel bound from the
// header before allocating.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "media/media_limits.h"
#include "media/rgb_image.h"

namespace tandem::media_detail {

struct DecodedFrame {
  RgbImage rgb;
  std::vector<uint8_t> exif;  // a TIFF block, with or without the "Exif\0\0" prefix
  std::string xmp;            // an XMP packet
};

DecodedFrame decode_png(std::span<const uint8_t> bytes, const MediaLimits& limits);
DecodedFrame decode_jpeg(std::span<const uint8_t> bytes, const MediaLimits& limits);
DecodedFrame decode_webp(std::span<const uint8_t> bytes, const MediaLimits& limits);
DecodedFrame decode_gif(std::span<const uint8_t> bytes, const MediaLimits& limits);

// Throws MediaError(kTooLarge) when width × height exceeds the bound, and MediaError(kCorrupt)
// when either is zero. `format` names the format in the message.
void check_image_size(std::string_view format, uint64_t width, uint64_t height,
                      const MediaLimits& limits);

}  // namespace tandem::media_detail
