// WebP and GIF decoding: lossless WebP equals the same pixels as PNG, lossy WebP equals
// libwebp's still-image decode, an animation gives its first frame on the canvas; GIF's first
// frame is composed on the logical screen as PIL composes it.
#include <gtest/gtest.h>

#include <webp/decode.h>

#include "media/image_decode.h"
#include "test_encoders.h"

namespace tandem {
namespace webp_gif_decode_test {

using test::Bytes;

RgbImage decode(const Bytes& bytes) { return decode_image(bytes, MediaLimits{}).rgb; }

Bytes rgba_of(const RgbImage& rgb, uint8_t alpha_base) {
  Bytes out;
  for (size_t i = 0; i < rgb.pixels.size(); i += 3) {
    out.insert(out.end(), {rgb.pixels[i], rgb.pixels[i + 1], rgb.pixels[i + 2],
                           uint8_t(alpha_base + i * 7)});
  }
  return out;
}

TEST(WebPDecode, LosslessEqualsPng) {
  const RgbImage src = test::pattern_image(41, 27, 5);
  const Bytes webp = test::encode_webp(src.pixels, 41, 27, 3, /*lossless=*/true);
  const DecodedImage out = decode_image(webp, MediaLimits{});
  EXPECT_EQ(out.format, ImageFormat::kWebP);
  EXPECT_EQ(out.rgb.pixels, decode(test::encode_png_rgb(src)).pixels);
  EXPECT_EQ(out.rgb.pixels, src.pixels);
}

TEST(WebPDecode, LosslessWithAlphaDropsAlphaLikeRgbaPng) {
  const RgbImage src = test::pattern_image(20, 13, 6);
  const Bytes rgba = rgba_of(src, 0);  // includes fully transparent pixels
  test::PngSpec png;
  png.width = 20, png.height = 13, png.color_type = 6, png.samples = rgba;
  const RgbImage from_webp = decode(test::encode_webp(rgba, 20, 13, 4, true));
  EXPECT_EQ(from_webp.pixels, decode(test::encode_png(png)).pixels);
  EXPECT_EQ(from_webp.pixels, src.pixels);
}

TEST(WebPDecode, LossyIsLibwebpsDecode) {
  const RgbImage src = test::pattern_image(33, 21, 7);
  const Bytes webp = test::encode_webp(src.pixels, 33, 21, 3, /*lossless=*/false);
  int w = 0, h = 0;
  uint8_t* ref = WebPDecodeRGB(webp.data(), webp.size(), &w, &h);
  ASSERT_NE(ref, nullptr);
  const Bytes reference(ref, ref + size_t(w) * h * 3);
  WebPFree(ref);
  EXPECT_EQ(decode(webp).pixels, reference);
}

TEST(WebPDecode, AnimationGivesItsFirstFrame) {
  const int w = 16, h = 12;
  // Frame 1: a transparent border (RGB 0 after dropping alpha, whatever its color bytes)
  // around an opaque pattern; frame 2 entirely different.
  Bytes first(size_t(w) * h * 4, 0), second(size_t(w) * h * 4, 200);
  const RgbImage inner = test::pattern_image(w, h, 8);
  for (int y = 2; y < 10; ++y) {
    for (int x = 3; x < 13; ++x) {
      const size_t i = size_t(y) * w + x;
      std::copy(inner.at(x, y), inner.at(x, y) + 3, first.begin() + 4 * i);
      first[4 * i + 3] = 255;
    }
  }
  const RgbImage out = decode(test::encode_webp_animation({first, second}, w, h));
  ASSERT_EQ(out.width, w);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool inside = y >= 2 && y < 10 && x >= 3 && x < 13;
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(out.at(x, y)[c], inside ? inner.at(x, y)[c] : 0) << x << "," << y;
      }
    }
  }
}

// ---- GIF ----

std::vector<uint8_t> ramp_palette(int n, int offset) {
  std::vector<uint8_t> p;
  for (int i = 0; i < n; ++i) p.insert(p.end(), {uint8_t(i * 10 + offset), uint8_t(i * 20), uint8_t(255 - i)});
  return p;
}

TEST(GifDecode, FirstFrameThroughItsPalette) {
  test::GifSpec s;
  s.width = 6, s.height = 4;
  s.global_palette = ramp_palette(8, 1);
  test::GifFrame f{0, 0, 6, 4, {}, {}, -1, false};
  for (int i = 0; i < 24; ++i) f.indices.push_back(uint8_t(i % 8));
  test::GifFrame second{0, 0, 6, 4, Bytes(24, 7), {}, -1, false};
  s.frames = {f, second};
  const DecodedImage out = decode_image(test::encode_gif(s), MediaLimits{});
  EXPECT_EQ(out.format, ImageFormat::kGif);
  for (int i = 0; i < 24; ++i) {
    const uint8_t* p = out.rgb.pixels.data() + 3 * i;
    const int k = i % 8;
    EXPECT_EQ(int(p[0]), k * 10 + 1);
    EXPECT_EQ(int(p[1]), k * 20);
    EXPECT_EQ(int(p[2]), 255 - k);
  }
}

TEST(GifDecode, UncoveredCanvasHoldsIndexZeroOrTheTransparentIndex) {
  for (int transparent : {-1, 3}) {
    test::GifSpec s;
    s.width = 5, s.height = 5;
    s.global_palette = ramp_palette(4, 2);
    s.frames = {{1, 2, 3, 2, Bytes{1, 2, 1, 2, 1, 3}, {}, transparent, false}};
    const RgbImage out = decode(test::encode_gif(s));
    const int fill = transparent < 0 ? 0 : transparent;
    for (int y = 0; y < 5; ++y) {
      for (int x = 0; x < 5; ++x) {
        const bool inside = x >= 1 && x < 4 && y >= 2 && y < 4;
        // The frame's own pixels are written, its transparent index (3) included.
        const int index = inside ? (Bytes{1, 2, 1, 2, 1, 3})[size_t((y - 2) * 3 + x - 1)] : fill;
        EXPECT_EQ(int(out.at(x, y)[0]), index * 10 + 2) << x << "," << y << " t=" << transparent;
      }
    }
  }
}

TEST(GifDecode, LocalPaletteAndOverhangingFrameGrowTheCanvas) {
  test::GifSpec s;
  s.width = 2, s.height = 2;
  s.global_palette = ramp_palette(2, 0);
  s.frames = {{1, 1, 3, 2, Bytes{0, 1, 0, 1, 0, 1}, ramp_palette(2, 100), -1, false}};
  const RgbImage out = decode(test::encode_gif(s));
  ASSERT_EQ(out.width, 4);
  ASSERT_EQ(out.height, 3);
  EXPECT_EQ(int(out.at(2, 1)[0]), 110);  // local palette entry 1
  EXPECT_EQ(int(out.at(0, 0)[0]), 100);  // canvas index 0, through the frame's palette
}

TEST(GifDecode, IdentityPaletteMeansGrayLevelsEvenPastTheTable) {
  // PIL opens a GIF whose palette is (i, i, i) as mode L: index 5 is gray 5, although the
  // table has 4 entries (with a real palette it would be black).
  std::vector<uint8_t> palette = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  const Bytes indices = {1, 3, 5, 200};
  RgbImage out = decode(test::encode_gif_8bit_codes(4, 1, palette, indices));
  EXPECT_EQ(int(out.at(1, 0)[1]), 3);
  EXPECT_EQ(int(out.at(2, 0)[0]), 5);
  EXPECT_EQ(int(out.at(3, 0)[2]), 200);
  palette[3] = 9;  // no longer the identity: indices past the table are black
  out = decode(test::encode_gif_8bit_codes(4, 1, palette, indices));
  EXPECT_EQ(int(out.at(0, 0)[0]), 9);
  EXPECT_EQ(int(out.at(2, 0)[0]), 0);
  EXPECT_EQ(int(out.at(3, 0)[2]), 0);
}

TEST(GifDecode, InterlacedEqualsPlain) {
  test::GifSpec s;
  s.width = 7, s.height = 19;
  s.global_palette = ramp_palette(16, 3);
  test::GifFrame f{0, 0, 7, 19, {}, {}, -1, false};
  for (int i = 0; i < 7 * 19; ++i) f.indices.push_back(uint8_t((i * 5) % 16));
  s.frames = {f};
  const RgbImage plain = decode(test::encode_gif(s));
  s.frames[0].interlace = true;
  EXPECT_EQ(decode(test::encode_gif(s)).pixels, plain.pixels);
}

}  // namespace webp_gif_decode_test
}  // namespace tandem
