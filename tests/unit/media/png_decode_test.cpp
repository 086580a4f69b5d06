// PNG decoding against PIL's semantics, stated per color type and bit depth: what
// PngImagePlugin opens each as, then what convert("RGB") makes of it.
#include <gtest/gtest.h>

#include "media/image_decode.h"
#include "test_encoders.h"

namespace tandem {
namespace png_decode_test {

using test::Bytes;
using test::PngSpec;

RgbImage decode(const Bytes& bytes) { return decode_image(bytes, MediaLimits{}).rgb; }

PngSpec spec(int w, int h, int depth, int color, Bytes samples) {
  PngSpec s;
  s.width = w, s.height = h, s.bit_depth = depth, s.color_type = color;
  s.samples = std::move(samples);
  return s;
}

void expect_pixel(const RgbImage& im, int x, int y, int r, int g, int b) {
  const uint8_t* p = im.at(x, y);
  EXPECT_EQ(int(p[0]), r) << "x=" << x << " y=" << y;
  EXPECT_EQ(int(p[1]), g) << "x=" << x << " y=" << y;
  EXPECT_EQ(int(p[2]), b) << "x=" << x << " y=" << y;
}

TEST(PngDecode, Rgb8IsExact) {
  const RgbImage src = test::pattern_image(37, 23, 1);
  const RgbImage out = decode(test::encode_png_rgb(src));
  ASSERT_EQ(out.width, 37);
  ASSERT_EQ(out.height, 23);
  EXPECT_EQ(out.pixels, src.pixels);
}

TEST(PngDecode, InterlacedEqualsPlain) {
  const RgbImage src = test::pattern_image(29, 31, 2);
  EXPECT_EQ(decode(test::encode_png_rgb(src, /*interlace=*/true)).pixels, src.pixels);
}

TEST(PngDecode, RgbaDropsAlphaWithoutCompositing) {
  // A fully transparent red pixel stays red (PIL drops alpha; it does not blend on white).
  const RgbImage out = decode(test::encode_png(spec(2, 1, 8, 6, {255, 0, 0, 0, 10, 20, 30, 128})));
  expect_pixel(out, 0, 0, 255, 0, 0);
  expect_pixel(out, 1, 0, 10, 20, 30);
}

TEST(PngDecode, SixteenBitRgbKeepsTheHighByte) {
  // PIL's RGB;16B unpacker takes the high byte: 0x12ff -> 0x12, not 0x13.
  const RgbImage out =
      decode(test::encode_png(spec(1, 1, 16, 2, {0x12, 0xff, 0x80, 0x80, 0xff, 0x01})));
  expect_pixel(out, 0, 0, 0x12, 0x80, 0xff);
}

TEST(PngDecode, SixteenBitRgbaAndGrayAlphaKeepTheHighByte) {
  expect_pixel(decode(test::encode_png(spec(1, 1, 16, 6, {1, 255, 2, 0, 3, 128, 0, 0}))), 0, 0,
               1, 2, 3);
  expect_pixel(decode(test::encode_png(spec(1, 1, 16, 4, {0xab, 0xcd, 0, 0}))), 0, 0, 0xab,
               0xab, 0xab);
}

TEST(PngDecode, SixteenBitGrayClipsLikePilsI16Conversion) {
  // PIL opens 16-bit gray as I;16; its RGB conversion clips the value to 255.
  const RgbImage out = decode(test::encode_png(spec(3, 1, 16, 0, {0, 200, 1, 0, 0xff, 0xff})));
  expect_pixel(out, 0, 0, 200, 200, 200);
  expect_pixel(out, 1, 0, 255, 255, 255);
  expect_pixel(out, 2, 0, 255, 255, 255);
}

TEST(PngDecode, Gray8AndGrayAlphaReplicate) {
  expect_pixel(decode(test::encode_png(spec(1, 1, 8, 0, {77}))), 0, 0, 77, 77, 77);
  expect_pixel(decode(test::encode_png(spec(1, 1, 8, 4, {99, 0}))), 0, 0, 99, 99, 99);
}

TEST(PngDecode, LowBitGrayIsScaledToFullRange) {
  // 1-bit is mode "1" (0/255); 2-bit steps of 0x55; 4-bit steps of 0x11.
  const RgbImage one = decode(test::encode_png(spec(9, 1, 1, 0, {0, 1, 1, 0, 1, 0, 0, 0, 1})));
  for (int x = 0; x < 9; ++x) {
    const int v = (x == 1 || x == 2 || x == 4 || x == 8) ? 255 : 0;
    expect_pixel(one, x, 0, v, v, v);
  }
  const RgbImage two = decode(test::encode_png(spec(4, 1, 2, 0, {0, 1, 2, 3})));
  for (int x = 0; x < 4; ++x) expect_pixel(two, x, 0, 0x55 * x, 0x55 * x, 0x55 * x);
  const RgbImage four = decode(test::encode_png(spec(3, 1, 4, 0, {0, 7, 15})));
  expect_pixel(four, 1, 0, 0x77, 0x77, 0x77);
  expect_pixel(four, 2, 0, 255, 255, 255);
}

TEST(PngDecode, PaletteExpandsAndIgnoresTransparency) {
  PngSpec s = spec(4, 1, 8, 3, {0, 1, 2, 1});
  s.palette = {10, 20, 30, 40, 50, 60, 70, 80, 90};
  s.trns = {0, 128};  // index 0 transparent, 1 half: PIL's RGB conversion ignores both
  const RgbImage out = decode(test::encode_png(s));
  expect_pixel(out, 0, 0, 10, 20, 30);
  expect_pixel(out, 1, 0, 40, 50, 60);
  expect_pixel(out, 2, 0, 70, 80, 90);
}

TEST(PngDecode, PaletteIndexPastThePaletteIsBlack) {
  PngSpec s = spec(2, 1, 8, 3, {1, 5});
  s.palette = {1, 2, 3, 4, 5, 6};
  const RgbImage out = decode(test::encode_png(s));
  expect_pixel(out, 0, 0, 4, 5, 6);
  expect_pixel(out, 1, 0, 0, 0, 0);
}

TEST(PngDecode, LowBitPalettesUnpackIndices) {
  PngSpec s = spec(5, 2, 2, 3, {0, 1, 2, 3, 0, 3, 2, 1, 0, 3});
  s.palette = {0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255};
  s.interlace = true;
  const RgbImage out = decode(test::encode_png(s));
  expect_pixel(out, 1, 0, 255, 0, 0);
  expect_pixel(out, 3, 0, 0, 0, 255);
  expect_pixel(out, 1, 1, 0, 255, 0);
  expect_pixel(out, 2, 1, 255, 0, 0);
}

TEST(PngDecode, GrayWithTrnsIsPlainGray) {
  PngSpec s = spec(2, 1, 8, 0, {0, 200});
  s.trns = {0, 200};
  const RgbImage out = decode(test::encode_png(s));
  expect_pixel(out, 1, 0, 200, 200, 200);
}

}  // namespace png_decode_test
}  // namespace tandem
