// RgbImage: decoded pixels as PIL's mode "RGB" holds them, 8 bits per channel, rows top to
// bottom, channels interleaved. Every decoder ends here, so the processors see one format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3]

  RgbImage() = default;
  RgbImage(int w, int h) : width(w), height(h), pixels(size_t(w) * size_t(h) * 3) {}

  size_t row_bytes() const { return size_t(width) * 3; }
  uint8_t* row(int y) { return pixels.data() + size_t(y) * row_bytes(); }
  const uint8_t* row(int y) const { return pixels.data() + size_t(y) * row_bytes(); }
  const uint8_t* at(int x, int y) const { return row(y) + size_t(x) * 3; }
};

}  // namespace tandem
