// media/png_encode: what it writes decodes (through tandem's own PNG decoder) to the same
// pixels, at sizes that exercise odd row lengths.
#include <gtest/gtest.h>

#include "core/error.h"
#include "media/image_decode.h"
#include "media/png_encode.h"
#include "test_encoders.h"

namespace tandem {
namespace png_encode_test {

TEST(PngEncode, RoundTripsThroughTheDecoder) {
  for (auto [w, h] : {std::pair{1, 1}, {7, 3}, {64, 64}, {301, 17}}) {
    RgbImage image = test::pattern_image(w, h, uint32_t(w * 31 + h));
    std::vector<uint8_t> png = encode_png(image);
    DecodedImage decoded = decode_image(png, MediaLimits{});
    EXPECT_EQ(decoded.format, ImageFormat::kPng);
    EXPECT_EQ(decoded.rgb.width, w);
    EXPECT_EQ(decoded.rgb.height, h);
    EXPECT_EQ(decoded.rgb.pixels, image.pixels) << w << "x" << h;
  }
}

TEST(PngEncode, AnEmptyImageIsAnError) {
  EXPECT_THROW(encode_png(RgbImage()), Error);
}

}  // namespace png_encode_test
}  // namespace tandem
