// JPEG decoding: the pixels libjpeg-turbo gives with its defaults (what PIL asks it for),
// gray replicated, CMYK read inverted as PIL's "CMYK;I" and converted with PIL's cmyk2rgb.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "media/image_decode.h"
#include "test_encoders.h"

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

namespace tandem {
namespace jpeg_decode_test {

using test::Bytes;

// libjpeg's own decode of the file into `space` with default settings: the reference the
// decoder must reproduce (same library, so equality is expected, not closeness).
Bytes libjpeg_decode(const Bytes& file, J_COLOR_SPACE space, int* width, int* height) {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, file.data(), file.size());
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = space;
  jpeg_start_decompress(&cinfo);
  *width = int(cinfo.output_width), *height = int(cinfo.output_height);
  Bytes out(size_t(*width) * *height * cinfo.output_components);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.data() + size_t(cinfo.output_scanline) * *width * cinfo.output_components;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

TEST(JpegDecode, RgbIsLibjpegsDefaultDecode) {
  RgbImage src(45, 33);  // a smooth gradient: JPEG keeps it close
  for (int y = 0; y < 33; ++y) {
    for (int x = 0; x < 45; ++x) {
      for (int c = 0; c < 3; ++c) src.row(y)[3 * x + c] = uint8_t(x * 3 + y * 2 + c * 20);
    }
  }
  const Bytes file = test::encode_jpeg_rgb(src, 90);
  int w = 0, h = 0;
  const Bytes reference = libjpeg_decode(file, JCS_RGB, &w, &h);
  const DecodedImage out = decode_image(file, MediaLimits{});
  EXPECT_EQ(out.format, ImageFormat::kJpeg);
  ASSERT_EQ(out.rgb.width, 45);
  ASSERT_EQ(out.rgb.height, 33);
  EXPECT_EQ(out.rgb.pixels, reference);
  // And it is the picture that was encoded (lossy, so only close).
  double err = 0;
  for (size_t i = 0; i < src.pixels.size(); ++i) err += std::abs(src.pixels[i] - reference[i]);
  EXPECT_LT(err / double(src.pixels.size()), 3.0);
}

TEST(JpegDecode, ProgressiveIsDecodedWhole) {
  const RgbImage src = test::pattern_image(40, 24, 4);
  test::JpegSpec s;
  s.width = 40, s.height = 24, s.samples = src.pixels, s.progressive = true;
  const Bytes file = test::encode_jpeg(s);
  int w = 0, h = 0;
  EXPECT_EQ(decode_image(file, MediaLimits{}).rgb.pixels, libjpeg_decode(file, JCS_RGB, &w, &h));
}

TEST(JpegDecode, GrayIsReplicated) {
  test::JpegSpec s;
  s.width = 19, s.height = 7, s.components = 1;
  for (int i = 0; i < 19 * 7; ++i) s.samples.push_back(uint8_t(i * 7));
  const Bytes file = test::encode_jpeg(s);
  int w = 0, h = 0;
  const Bytes gray = libjpeg_decode(file, JCS_GRAYSCALE, &w, &h);
  const RgbImage out = decode_image(file, MediaLimits{}).rgb;
  ASSERT_EQ(out.pixels.size(), gray.size() * 3);
  for (size_t i = 0; i < gray.size(); ++i) {
    ASSERT_EQ(out.pixels[3 * i], gray[i]);
    ASSERT_EQ(out.pixels[3 * i + 1], gray[i]);
    ASSERT_EQ(out.pixels[3 * i + 2], gray[i]);
  }
}

TEST(JpegDecode, CmykIsInvertedThenConvertedAsPil) {
  test::JpegSpec s;
  s.width = 16, s.height = 16, s.components = 4, s.quality = 100;
  for (int i = 0; i < 16 * 16; ++i) {
    s.samples.insert(s.samples.end(), {uint8_t(i), uint8_t(255 - i), uint8_t(i * 3), uint8_t(i / 2 + 60)});
  }
  const Bytes file = test::encode_jpeg(s);
  int w = 0, h = 0;
  const Bytes cmyk = libjpeg_decode(file, JCS_CMYK, &w, &h);
  const RgbImage out = decode_image(file, MediaLimits{}).rgb;
  for (int i = 0; i < 16 * 16; ++i) {
    // PIL: c = 255 - stored, k = 255 - stored k; RGB = (255 - k) - round(c (255 - k) / 255).
    const int nk = cmyk[size_t(4 * i + 3)];
    for (int ch = 0; ch < 3; ++ch) {
      const int c = 255 - cmyk[size_t(4 * i + ch)];
      const int expected = nk - int(std::floor(c * nk / 255.0 + 0.5));
      ASSERT_EQ(int(out.pixels[size_t(3 * i + ch)]), expected) << "pixel " << i << " channel " << ch;
    }
  }
}

}  // namespace jpeg_decode_test
}  // namespace tandem
