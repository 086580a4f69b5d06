// EXIF orientation: the parser on hand-made TIFF blocks, and every orientation applied to
// a picture with four differently colored quadrants, checked against what the EXIF spec
// says the viewer shows (JPEG APP1, PNG eXIf, XMP fallback).
#include "media/exif_orientation.h"

#include <gtest/gtest.h>

#include "media/image_decode.h"
#include "test_encoders.h"

namespace tandem {
namespace exif_orientation_test {

using test::Bytes;

enum Color { kRed, kGreen, kBlue, kWhite };
constexpr uint8_t kRgb[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};

// 64x32: top-left red, top-right green, bottom-left blue, bottom-right white.
RgbImage quadrants() {
  RgbImage im(64, 32);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 64; ++x) {
      const int q = (y < 16 ? 0 : 2) + (x < 32 ? 0 : 1);
      std::copy(kRgb[q], kRgb[q] + 3, im.row(y) + 3 * x);
    }
  }
  return im;
}

Color nearest_color(const uint8_t* p) {
  int best = 0, best_d = 1 << 30;
  for (int c = 0; c < 4; ++c) {
    int d = 0;
    for (int i = 0; i < 3; ++i) d += (p[i] - kRgb[c][i]) * (p[i] - kRgb[c][i]);
    if (d < best_d) best = c, best_d = d;
  }
  return Color(best);
}

// The quadrant colors as displayed (TL, TR, BL, BR) per orientation.
struct Expected {
  int orientation;
  bool swaps;
  Color tl, tr, bl, br;
};
constexpr Expected kExpected[] = {
    {1, false, kRed, kGreen, kBlue, kWhite},  {2, false, kGreen, kRed, kWhite, kBlue},
    {3, false, kWhite, kBlue, kGreen, kRed},  {4, false, kBlue, kWhite, kRed, kGreen},
    {5, true, kRed, kBlue, kGreen, kWhite},   {6, true, kBlue, kRed, kWhite, kGreen},
    {7, true, kWhite, kGreen, kBlue, kRed},   {8, true, kGreen, kWhite, kRed, kBlue},
};

void expect_quadrants(const DecodedImage& out, const Expected& e) {
  SCOPED_TRACE("orientation " + std::to_string(e.orientation));
  EXPECT_EQ(out.orientation, e.orientation);
  ASSERT_EQ(out.rgb.width, e.swaps ? 32 : 64);
  ASSERT_EQ(out.rgb.height, e.swaps ? 64 : 32);
  const int w = out.rgb.width, h = out.rgb.height;
  EXPECT_EQ(nearest_color(out.rgb.at(w / 4, h / 4)), e.tl);
  EXPECT_EQ(nearest_color(out.rgb.at(3 * w / 4, h / 4)), e.tr);
  EXPECT_EQ(nearest_color(out.rgb.at(w / 4, 3 * h / 4)), e.bl);
  EXPECT_EQ(nearest_color(out.rgb.at(3 * w / 4, 3 * h / 4)), e.br);
}

TEST(ExifOrientation, EveryOrientationFromJpegApp1) {
  for (const Expected& e : kExpected) {
    for (bool little : {true, false}) {
      const Bytes file = test::encode_jpeg_rgb(quadrants(), 95, test::exif_with_orientation(e.orientation, little));
      expect_quadrants(decode_image(file, MediaLimits{}), e);
    }
  }
}

TEST(ExifOrientation, PngEXIfChunk) {
  for (const Expected& e : kExpected) {
    test::PngSpec s;
    s.width = 64, s.height = 32, s.color_type = 2, s.samples = quadrants().pixels;
    const Bytes exif = test::exif_with_orientation(e.orientation);
    s.exif.assign(exif.begin() + 6, exif.end());  // eXIf holds the TIFF block itself
    const DecodedImage out = decode_image(test::encode_png(s), MediaLimits{});
    expect_quadrants(out, e);
    // Lossless: the rotation moved every pixel, not just the quadrant centers.
    EXPECT_EQ(out.rgb.pixels, apply_orientation(quadrants(), e.orientation).pixels);
  }
}

TEST(ExifOrientation, XmpIsTheFallbackAndExifWins) {
  const std::string xmp_text = std::string("http://ns.adobe.com/xap/1.0/") + '\0' +
                               "<x:xmpmeta><rdf:Description tiff:Orientation=\"6\"/></x:xmpmeta>";
  const Bytes xmp(xmp_text.begin(), xmp_text.end());
  expect_quadrants(decode_image(test::encode_jpeg_rgb(quadrants(), 95, xmp), MediaLimits{}),
                   kExpected[5]);
  EXPECT_EQ(xmp_orientation("<tiff:Orientation>3</tiff:Orientation>"), 3);
  EXPECT_EQ(xmp_orientation("tiff:Orientation=\"x\" tiff:Orientation=\"8\""), 8);
  EXPECT_EQ(xmp_orientation("tiff:Orientation=8"), std::nullopt);
}

TEST(ExifOrientation, ParserReadsShortAndLongAndRejectsJunk) {
  Bytes block = test::exif_with_orientation(6);
  EXPECT_EQ(exif_orientation(block), 6);
  EXPECT_EQ(exif_orientation(Bytes(block.begin() + 6, block.end())), 6);  // no prefix
  EXPECT_EQ(exif_orientation(test::exif_with_orientation(3, false)), 3);
  Bytes as_long = block;
  as_long[6 + 8 + 2 + 2] = 4;  // type LONG: the value is the whole 4-byte field
  as_long[6 + 8 + 2 + 10] = 0;
  EXPECT_EQ(exif_orientation(as_long), 6);
  Bytes other_tag = block;
  other_tag[6 + 8 + 2] = 0x13;  // 0x0113 is not the orientation
  EXPECT_EQ(exif_orientation(other_tag), std::nullopt);
  EXPECT_EQ(exif_orientation(Bytes(block.begin(), block.end() - 8)), std::nullopt);  // cut IFD
  Bytes far_ifd = block;
  far_ifd[6 + 4] = 0xff, far_ifd[6 + 7] = 0x7f;  // IFD0 offset past the end
  EXPECT_EQ(exif_orientation(far_ifd), std::nullopt);
  Bytes many = block;
  many[6 + 8] = 0xff, many[6 + 9] = 0xff;  // 65535 entries claimed, one present
  EXPECT_EQ(exif_orientation(many), 6);
  EXPECT_EQ(exif_orientation(Bytes{'M', 'M', 0, 42}), std::nullopt);
}

TEST(ExifOrientation, OutOfRangeValuesAreIgnored) {
  for (int value : {0, 9, 300}) {
    const Bytes file = test::encode_jpeg_rgb(quadrants(), 95, test::exif_with_orientation(value));
    expect_quadrants(decode_image(file, MediaLimits{}), kExpected[0]);
  }
}

}  // namespace exif_orientation_test
}  // namespace tandem
