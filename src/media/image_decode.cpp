#include "media/image_decode.h"

#include <optional>

#include "media/decoders.h"
#include "media/exif_orientation.h"
#include "media/media_error.h"

namespace tandem {
namespace media_detail {

void check_image_size(std::string_view format, uint64_t width, uint64_t height,
                      const MediaLimits& limits) {
  if (width == 0 || height == 0) {
    media_fail(MediaErrorKind::kCorrupt, "{} image has an empty size ({}x{})", format, width,
               height);
  }
  if (width > limits.max_image_side || height > limits.max_image_side) {
    media_fail(MediaErrorKind::kTooLarge, "{} image is {}x{}, over the limit of {} pixels a side",
               format, width, height, limits.max_image_side);
  }
  if (width * height > limits.max_image_pixels) {
    media_fail(MediaErrorKind::kTooLarge,
               "{} image is {}x{} = {} pixels, over the limit of {} pixels (--max-image-pixels)",
               format, width, height, width * height, limits.max_image_pixels);
  }
}

}  // namespace media_detail

namespace {

media_detail::DecodedFrame decode_frame(ImageFormat format, std::span<const uint8_t> bytes,
                                        const MediaLimits& limits) {
  switch (format) {
    case ImageFormat::kPng: return media_detail::decode_png(bytes, limits);
    case ImageFormat::kJpeg: return media_detail::decode_jpeg(bytes, limits);
    case ImageFormat::kWebP: return media_detail::decode_webp(bytes, limits);
    case ImageFormat::kGif: return media_detail::decode_gif(bytes, limits);
    default: break;
  }
  if (format == ImageFormat::kUnknown) {
    media_fail(MediaErrorKind::kUnsupported,
               "image data is not a known image format (send PNG, JPEG, WebP or GIF)");
  }
  media_fail(MediaErrorKind::kUnsupported,
             "{} images are not supported (send PNG, JPEG, WebP or GIF)",
             image_format_name(format));
}

// PIL's getexif: the EXIF orientation, else XMP's tiff:Orientation; exif_transpose acts on
// 2..8 only.
int frame_orientation(const media_detail::DecodedFrame& frame) {
  std::optional<int> orientation = exif_orientation(frame.exif);
  if (!orientation) orientation = xmp_orientation(frame.xmp);
  return orientation && *orientation >= 2 && *orientation <= 8 ? *orientation : 1;
}

}  // namespace

DecodedImage decode_image(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  if (bytes.empty()) media_fail(MediaErrorKind::kCorrupt, "image data is empty");
  if (bytes.size() > limits.max_image_bytes) {
    media_fail(MediaErrorKind::kTooLarge,
               "image is {} bytes, over the limit of {} bytes (--max-image-bytes)", bytes.size(),
               limits.max_image_bytes);
  }
  DecodedImage out;
  out.format = sniff_image_format(bytes);
  media_detail::DecodedFrame frame = decode_frame(out.format, bytes, limits);
  out.orientation = frame_orientation(frame);
  out.rgb = apply_orientation(std::move(frame.rgb), out.orientation);
  return out;
}

}  // namespace tandem
