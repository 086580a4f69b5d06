// Images for the server tests: PNGs made in memory (media/png_encode.h), hostile variants of
// them, data: URLs, and a served model that takes images (the Gemma 3 vision oracle's
// tokenizer, template and processor over a FakeEngine, its "takes images" set as the vision
// engine will set it).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/base64.h"
#include "fake_engine.h"
#include "media/png_encode.h"
#include "server/common/served_model.h"

namespace tandem::server::testing {

using Bytes = std::vector<uint8_t>;

inline std::filesystem::path gemma3_vision_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle/vision/gemma3_vision";
}

// A smooth, seed-dependent picture.
inline Bytes test_png(int width, int height, uint32_t seed = 1) {
  RgbImage image(width, height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = image.row(y) + size_t(x) * 3;
      p[0] = uint8_t(x * 255 / std::max(1, width - 1) + seed);
      p[1] = uint8_t(y * 255 / std::max(1, height - 1) + 7 * seed);
      p[2] = uint8_t((x + y + 13 * seed) & 0xff);
    }
  return encode_png(image);
}

// A small PNG whose header declares width × height (CRC fixed): a decompression bomb's
// shape, refused from its header before any pixel buffer exists.
inline Bytes png_declaring(uint32_t width, uint32_t height) {
  Bytes png = test_png(4, 4);
  // Signature (8), IHDR length (4) and type (4): width at 16, height at 20, CRC at 29.
  for (int i = 0; i < 4; ++i) {
    png[size_t(16 + i)] = uint8_t(width >> (24 - 8 * i));
    png[size_t(20 + i)] = uint8_t(height >> (24 - 8 * i));
  }
  uint32_t crc = uint32_t(crc32(0, png.data() + 12, 17));  // type + 13 data bytes
  for (int i = 0; i < 4; ++i) png[size_t(29 + i)] = uint8_t(crc >> (24 - 8 * i));
  return png;
}

inline Bytes file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline std::string data_url(const Bytes& bytes, const std::string& type = "image/png") {
  return "data:" + type + ";base64," + base64::encode(bytes);
}

inline Json image_url_part(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

// The Gemma 3 vision oracle's folder served over `engine`, as a model that takes images.
inline ServedModel vision_model(FakeEngine& engine) {
  auto tokenizer = Tokenizer::load(gemma3_vision_dir());
  engine.info().vocab_size = tokenizer->vocab_size();
  ServedModel m = load_served_model(gemma3_vision_dir(), engine, tokenizer);
  m.images.takes_images = true;  // the vision engine's word, once it reports it
  m.images.refusal.clear();
  return m;
}

}  // namespace tandem::server::testing
