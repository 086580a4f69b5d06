// The processors against transformers 5.17's PIL image processors on the vision oracle's
// images: pixel values within 1e-6, Gemma 4's patch positions equal, soft-token counts
// equal (tests/data/oracle/vision/<model>/: images/, processor_config.json, and
// pixels.safetensors extracted from the oracle's goldens by extract_pixels.py).
#include <gtest/gtest.h>

#include <cmath>

#include "media/image_processor.h"
#include "test_files.h"

namespace tandem {
namespace oracle_pixels_test {

using test::RawTensor;

// The processor's float for a stored uint8 (extract_pixels.py proved the floats are exactly
// this): numpy's rescale (float64 product, then float32) and float32 normalize.
float processor_value(const ImageProcessorConfig& c, uint8_t u, int channel) {
  float v = c.do_rescale ? float(double(u) * c.rescale_factor) : float(u);
  if (c.do_normalize) v = (v - c.image_mean[size_t(channel)]) / c.image_std[size_t(channel)];
  return v;
}

// Max |ours - processor's| over an image; `channel_of` maps a flat index to its channel.
template <typename ChannelOf>
double max_abs_diff(const ImageInput& ours, const RawTensor& u8, const ImageProcessorConfig& c,
                    ChannelOf channel_of) {
  EXPECT_EQ(ours.pixels.numel(), u8.numel());
  if (ours.pixels.numel() != u8.numel()) return INFINITY;
  double diff = 0;
  for (int64_t k = 0; k < u8.numel(); ++k) {
    const float expected = processor_value(c, u8.u8(k), channel_of(k));
    diff = std::max(diff, double(std::fabs(ours.pixels.ptr<float>()[k] - expected)));
  }
  return diff;
}

class VisionOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(VisionOracle, PixelValuesPositionsAndSoftTokens) {
  const auto dir = test::vision_oracle_dir(GetParam());
  const ImageProcessor proc = ImageProcessor::load(dir);
  const ImageProcessorConfig& c = proc.config();
  const bool gemma3 = c.kind == ImageProcessorKind::kGemma3;
  const test::RawSafetensors golden = test::read_raw_safetensors(dir / "pixels.safetensors");
  const nlohmann::json cases = nlohmann::json::parse(golden.metadata.at("cases"));
  ASSERT_EQ(cases.size(), 5u);
  int num_images = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    int soft_tokens = 0;
    for (size_t j = 0; j < cases[i]["images"].size(); ++j, ++num_images) {
      SCOPED_TRACE(cases[i]["images"][j].get<std::string>());
      const auto bytes = test::read_file(dir / cases[i]["images"][j].get<std::string>());
      const ProcessedImage image = proc.process(bytes, MediaLimits{});
      ASSERT_EQ(image.parts.size(), 1u);
      const ImageInput& part = *image.parts[0];
      soft_tokens += part.num_soft_tokens;
      const std::string key = std::to_string(i) + "." + std::to_string(j);
      const RawTensor& u8 = golden.tensors.at("pixel_u8." + key);
      std::vector<int64_t> shape(part.pixels.shape.dims.begin(),
                                 part.pixels.shape.dims.begin() + part.pixels.ndim());
      ASSERT_EQ(shape, u8.shape);
      const int64_t plane = gemma3 ? u8.shape[1] * u8.shape[2] : 0;
      const double diff = max_abs_diff(part, u8, c, [&](int64_t k) {
        return gemma3 ? int(k / plane) : int(k % 3);
      });
      EXPECT_LE(diff, 1e-6);
      if (gemma3) {
        EXPECT_TRUE(part.position_ids.empty());
        continue;
      }
      const RawTensor& pos = golden.tensors.at("image_position_ids." + key);
      ASSERT_EQ(int64_t(part.position_ids.size()), pos.numel());
      for (int64_t k = 0; k < pos.numel(); ++k) {
        ASSERT_EQ(part.position_ids[size_t(k)], pos.i32(k)) << "position " << k;
      }
    }
    EXPECT_EQ(soft_tokens, cases[i]["image_tokens"].get<int>()) << "case " << i;
  }
  EXPECT_EQ(num_images, 6);
}

// The float function the test applies to the stored uint8s is the processor's own: checked
// on floats the processor wrote (case 0's first image, or its first patches).
TEST_P(VisionOracle, StoredFloatsMatchTheRescaleAndNormalize) {
  const auto dir = test::vision_oracle_dir(GetParam());
  const ImageProcessor proc = ImageProcessor::load(dir);
  const bool gemma3 = proc.config().kind == ImageProcessorKind::kGemma3;
  const test::RawSafetensors golden = test::read_raw_safetensors(dir / "pixels.safetensors");
  const RawTensor& head = golden.tensors.at("pixel_values_head.0.0");
  const RawTensor& u8 = golden.tensors.at("pixel_u8.0.0");
  ASSERT_GT(head.numel(), 0);
  const int64_t plane = gemma3 ? u8.shape[1] * u8.shape[2] : 0;
  for (int64_t k = 0; k < head.numel(); ++k) {
    const int channel = gemma3 ? int(k / plane) : int(k % 3);
    ASSERT_EQ(processor_value(proc.config(), u8.u8(k), channel), head.f32(k)) << k;
  }
  const nlohmann::json cases = nlohmann::json::parse(golden.metadata.at("cases"));
  const auto bytes = test::read_file(dir / cases[0]["images"][0].get<std::string>());
  const ProcessedImage processed = proc.process(bytes, MediaLimits{});
  const ImageInput& ours = *processed.parts[0];
  double diff = 0;
  for (int64_t k = 0; k < head.numel(); ++k) {
    diff = std::max(diff, double(std::fabs(ours.pixels.ptr<float>()[k] - head.f32(k))));
  }
  EXPECT_LE(diff, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Oracle, VisionOracle,
                         ::testing::Values("gemma3_vision", "gemma4_vision_bidir",
                                           "gemma4_vision_causal"));

}  // namespace oracle_pixels_test
}  // namespace tandem
