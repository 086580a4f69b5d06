#include "media/png_encode.h"

#include <png.h>

#include "core/error.h"

namespace tandem {

std::vector<uint8_t> encode_png(const RgbImage& image) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = png_uint_32(image.width);
  png.height = png_uint_32(image.height);
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  // The first call measures, the second writes.
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr))
    fail("encode_png: {}", png.message);
  std::vector<uint8_t> out(size);
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, image.pixels.data(), 0, nullptr))
    fail("encode_png: {}", png.message);
  out.resize(size);
  png_image_free(&png);
  return out;
}

}  // namespace tandem
