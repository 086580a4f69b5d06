#include "media/image_format.h"

#include <cstring>

namespace tandem {
namespace {

bool starts_with(std::span<const uint8_t> bytes, size_t offset, std::string_view magic) {
  return bytes.size() >= offset + magic.size() &&
         std::memcmp(bytes.data() + offset, magic.data(), magic.size()) == 0;
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> bytes) {
  using namespace std::string_view_literals;
  if (starts_with(bytes, 0, "\x89PNG\r\n\x1a\n"sv)) return ImageFormat::kPng;
  // PIL's test: FF D8 FF (start of image, then any marker).
  if (starts_with(bytes, 0, "\xff\xd8\xff"sv)) return ImageFormat::kJpeg;
  if (starts_with(bytes, 0, "RIFF"sv) && starts_with(bytes, 8, "WEBP"sv)) return ImageFormat::kWebP;
  if (starts_with(bytes, 0, "GIF87a"sv) || starts_with(bytes, 0, "GIF89a"sv)) {
    return ImageFormat::kGif;
  }
  if (starts_with(bytes, 0, "BM"sv)) return ImageFormat::kBmp;
  if (starts_with(bytes, 0, "II*\0"sv) || starts_with(bytes, 0, "MM\0*"sv)) return ImageFormat::kTiff;
  if (starts_with(bytes, 0, "\0\0\1\0"sv)) return ImageFormat::kIco;
  if (starts_with(bytes, 4, "ftyp"sv)) return ImageFormat::kHeifOrAvif;
  if (starts_with(bytes, 0, "\0\0\0\x0cjP  "sv) || starts_with(bytes, 0, "\xff\x4f\xff\x51"sv)) {
    return ImageFormat::kJpeg2000;
  }
  if (starts_with(bytes, 0, "8BPS"sv)) return ImageFormat::kPsd;
  return ImageFormat::kUnknown;
}

std::string_view image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebP: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kIco: return "ICO";
    case ImageFormat::kHeifOrAvif: return "HEIF/AVIF";
    case ImageFormat::kJpeg2000: return "JPEG 2000";
    case ImageFormat::kPsd: return "PSD";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

bool image_format_supported(ImageFormat format) {
  return format == ImageFormat::kPng || format == ImageFormat::kJpeg ||
         format == ImageFormat::kWebP || format == ImageFormat::kGif;
}

}  // namespace tandem
