// encode_png: an RgbImage as a PNG file in memory (libpng's simplified writer). tandem itself
// only decodes images; this is for the tools that make them: `tandem bench --image`'s
// synthetic images and the tests that send images through the server.
#pragma once

#include <cstdint>
#include <vector>

#include "media/rgb_image.h"

namespace tandem {

// 8-bit RGB, default compression. Throws tandem::Error if libpng refuses (an empty image).
std::vector<uint8_t> encode_png(const RgbImage& image);

}  // namespace tandem
