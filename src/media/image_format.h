// The format of an image, sniffed from its first bytes (a declared MIME type or file name
// is never trusted: a data: URL saying image/png may hold a JPEG, and is decoded as one).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tandem {

enum class ImageFormat {
  kPng,
  kJpeg,
  kWebP,
  kGif,
  // Recognised only to name them in the refusal:
  kBmp,
  kTiff,
  kIco,
  kHeifOrAvif,
  kJpeg2000,
  kPsd,
  kUnknown,
};

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// "PNG", "JPEG", ..., "unknown".
std::string_view image_format_name(ImageFormat format);

// True for the formats tandem decodes (PNG, JPEG, WebP, GIF).
bool image_format_supported(ImageFormat format);

}  // namespace tandem
