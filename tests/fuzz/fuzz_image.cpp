// libFuzzer target: image bytes through decode_image and both processors (Gemma 3 with
// pan-and-scan, Gemma 4), under limits small enough to keep each input fast. Invariants:
// the only exception is MediaError; a decoded image has width × height × 3 bytes within the
// limits; every part's pixel tensor has the processor's shape and its soft-token count.
#include <memory>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "media/image_processor.h"
#include "media/media_error.h"

namespace {

using namespace tandem;

const MediaLimits& limits() {
  static const MediaLimits l = [] {
    MediaLimits m;
    m.max_image_bytes = 1 << 20;
    m.max_image_pixels = 1 << 20;
    m.max_image_side = 4096;
    return m;
  }();
  return l;
}

const std::vector<ImageProcessor>& processors() {
  static const std::vector<ImageProcessor> all = [] {
    std::vector<ImageProcessor> v;
    const ImageProcessorConfig g3 = parse_image_processor_config(
        {{"image_processor_type", "Gemma3ImageProcessor"}, {"size", {{"height", 32}, {"width", 32}}},
         {"do_pan_and_scan", true}, {"pan_and_scan_min_crop_size", 16}},
        {{"image_seq_length", 4}}, {}, "fuzz");
    v.emplace_back(g3, parse_image_prompt_spec({}, {}, ImageProcessorKind::kGemma3));
    const ImageProcessorConfig g4 = parse_image_processor_config(
        {{"image_processor_type", "Gemma4ImageProcessor"}, {"patch_size", 4},
         {"pooling_kernel_size", 3}, {"max_soft_tokens", 70}},
        {}, {}, "fuzz");
    v.emplace_back(g4, parse_image_prompt_spec({}, {}, ImageProcessorKind::kGemma4));
    return v;
  }();
  return all;
}

void check_part(const ImageProcessorConfig& c, const ImageInput& part) {
  if (c.kind == ImageProcessorKind::kGemma3) {
    if (!(part.pixels.shape == Shape{3, c.height, c.width})) {
      tandem::fuzz::fail("gemma3 shape", part.pixels.shape.str());
    }
    return;
  }
  const int64_t patches = part.pixels.dim(0);
  const int pool = c.pooling_kernel_size * c.pooling_kernel_size;
  if (part.pixels.dim(1) != 3 * c.patch_size * c.patch_size ||
      int64_t(part.position_ids.size()) != 2 * patches || part.num_soft_tokens * pool != patches ||
      part.num_soft_tokens > c.max_soft_tokens) {
    tandem::fuzz::fail("gemma4 shape", part.pixels.shape.str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  DecodedImage decoded;
  try {
    decoded = decode_image(bytes, limits());
  } catch (const MediaError&) {
    return 0;
  }
  const RgbImage& rgb = decoded.rgb;
  if (rgb.pixels.size() != size_t(rgb.width) * size_t(rgb.height) * 3 ||
      uint64_t(rgb.width) * uint64_t(rgb.height) > limits().max_image_pixels) {
    tandem::fuzz::fail("decoded size", std::to_string(rgb.width) + "x" + std::to_string(rgb.height));
  }
  for (const ImageProcessor& proc : processors()) {
    try {
      const ProcessedImage out = proc.process(rgb);
      for (const auto& part : out.parts) check_part(proc.config(), *part);
      if (proc.prompt_text(out).empty()) tandem::fuzz::fail("prompt text", "empty");
    } catch (const MediaError&) {
    }
  }
  return 0;
}
