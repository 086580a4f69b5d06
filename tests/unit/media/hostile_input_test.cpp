// Hostile images: each refused with a MediaError of the right kind and a message naming the
// cause, never a crash, and oversized ones refused from the header alone (the files below
// carry no pixel data: had the decoder gone past the header it would have reported a
// truncated file instead of the size).
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "media/image_decode.h"
#include "media/media_error.h"
#include "test_encoders.h"

namespace tandem {
namespace hostile_input_test {

using test::Bytes;

// The MediaError decoding `bytes` throws (fails the test if there is none).
MediaError decode_error(const Bytes& bytes, const MediaLimits& limits = MediaLimits{}) {
  try {
    decode_image(bytes, limits);
  } catch (const MediaError& e) {
    return e;
  }
  ADD_FAILURE() << "decoded without an error";
  return MediaError(MediaErrorKind::kConfig, "none");
}

void expect_error(const Bytes& bytes, MediaErrorKind kind, const std::string& needle,
                  const MediaLimits& limits = MediaLimits{}) {
  const MediaError e = decode_error(bytes, limits);
  EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
}

uint32_t crc32(const uint8_t* data, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= data[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

void put_be32(Bytes& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + size_t(i)] = uint8_t(v >> (24 - 8 * i));
}

// The PNG signature and an IHDR chunk, nothing else.
Bytes png_header_only(uint32_t width, uint32_t height, int depth = 8, int color = 2) {
  Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  b.resize(16 + 13 + 4);
  put_be32(b, 16, width);
  put_be32(b, 20, height);
  b[24] = uint8_t(depth), b[25] = uint8_t(color);
  put_be32(b, 29, crc32(b.data() + 12, 17));
  return b;
}

Bytes valid_file(ImageFormat format) {
  const RgbImage im = test::pattern_image(64, 48, 11);
  switch (format) {
    case ImageFormat::kPng: return test::encode_png_rgb(im);
    case ImageFormat::kJpeg: return test::encode_jpeg_rgb(im, 90);
    case ImageFormat::kWebP: return test::encode_webp(im.pixels, 64, 48, 3, false);
    default: break;
  }
  test::GifSpec s;
  s.width = 64, s.height = 48;
  for (int i = 0; i < 256; ++i) s.global_palette.insert(s.global_palette.end(), {uint8_t(i), uint8_t(i * 3), uint8_t(i * 7)});
  test::GifFrame f{0, 0, 64, 48, {}, {}, -1, false};
  for (size_t i = 0; i < im.pixels.size(); i += 3) f.indices.push_back(im.pixels[i]);
  s.frames = {f};
  return test::encode_gif(s);
}

constexpr ImageFormat kFormats[] = {ImageFormat::kPng, ImageFormat::kJpeg, ImageFormat::kWebP,
                                    ImageFormat::kGif};

TEST(HostileImage, PngDeclaring30000SquaredIsRefusedFromTheHeader) {
  expect_error(png_header_only(30000, 30000), MediaErrorKind::kTooLarge, "30000x30000");
  // Under the bound, the same header-only file is reported as what it is: truncated.
  expect_error(png_header_only(300, 300), MediaErrorKind::kCorrupt, "truncated");
}

TEST(HostileImage, JpegDeclaring30000SquaredIsRefusedFromTheHeader) {
  Bytes file = valid_file(ImageFormat::kJpeg);
  // Patch the SOF0 marker's height and width (big-endian, after length and precision).
  for (size_t i = 2; i + 9 < file.size(); ++i) {
    if (file[i] == 0xff && file[i + 1] == 0xc0) {
      file[i + 5] = 30000 >> 8, file[i + 6] = 30000 & 0xff;
      file[i + 7] = 30000 >> 8, file[i + 8] = 30000 & 0xff;
      break;
    }
  }
  expect_error(file, MediaErrorKind::kTooLarge, "30000x30000");
}

TEST(HostileImage, WebPAndGifDeclaringHugeCanvasesAreRefused) {
  Bytes webp = test::encode_webp(test::pattern_image(8, 8, 1).pixels, 8, 8, 3, true);
  ASSERT_EQ(std::string(webp.begin() + 12, webp.begin() + 16), "VP8L");
  // VP8L header: 0x2f, then 14 bits width-1 and 14 bits height-1, little-endian.
  const uint32_t dims = (16000u - 1) | ((16000u - 1) << 14) | (uint32_t(webp[24]) & 0xf0) << 24;
  for (int i = 0; i < 4; ++i) webp[21 + size_t(i)] = uint8_t(dims >> (8 * i));
  expect_error(webp, MediaErrorKind::kTooLarge, "16000x16000");

  test::GifSpec s;
  s.width = 30000, s.height = 30000;
  s.global_palette = {0, 0, 0, 255, 255, 255};
  s.frames = {{0, 0, 1, 1, Bytes{1}, {}, -1, false}};
  expect_error(test::encode_gif(s), MediaErrorKind::kTooLarge, "30000x30000");
}

TEST(HostileImage, SideLimitAndByteLimit) {
  expect_error(png_header_only(70000, 1), MediaErrorKind::kTooLarge, "a side");
  MediaLimits small;
  small.max_image_bytes = 100;
  expect_error(valid_file(ImageFormat::kPng), MediaErrorKind::kTooLarge, "--max-image-bytes",
               small);
}

TEST(HostileImage, DecompressionBombIsBoundedByThePixelLimit) {
  // 2000x2000 of 1-bit zeros: a few hundred bytes that expand to 4 Mpx.
  test::PngSpec s;
  s.width = 2000, s.height = 2000, s.bit_depth = 1, s.color_type = 0;
  s.samples.assign(size_t(2000) * 2000, 0);
  const Bytes bomb = test::encode_png(s);
  EXPECT_LT(bomb.size(), 4000u);
  MediaLimits limits;
  limits.max_image_pixels = 1'000'000;
  expect_error(bomb, MediaErrorKind::kTooLarge, "--max-image-pixels", limits);
  limits.max_image_pixels = 5'000'000;
  EXPECT_EQ(decode_image(bomb, limits).rgb.width, 2000);
}

TEST(HostileImage, TruncatedFilesOfEveryFormat) {
  for (ImageFormat format : kFormats) {
    const Bytes file = valid_file(format);
    ASSERT_NO_THROW(decode_image(file, MediaLimits{})) << image_format_name(format);
    for (double f : {0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97}) {
      const Bytes cut(file.begin(), file.begin() + int64_t(double(file.size()) * f));
      SCOPED_TRACE(std::string(image_format_name(format)) + " cut at " + std::to_string(cut.size()));
      const MediaError e = decode_error(cut);
      EXPECT_NE(int(e.kind()), int(MediaErrorKind::kTooLarge)) << e.what();
    }
  }
}

TEST(HostileImage, RandomCorruptionNeverEscapesAsAnythingButMediaError) {
  std::mt19937 rng(1234);
  for (ImageFormat format : kFormats) {
    const Bytes file = valid_file(format);
    int decoded = 0, refused = 0;
    for (int trial = 0; trial < 150; ++trial) {
      Bytes bad = file;
      const int flips = 1 + int(rng() % 8);
      for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] ^= uint8_t(1 + rng() % 255);
      try {
        const DecodedImage out = decode_image(bad, MediaLimits{});
        EXPECT_EQ(out.rgb.pixels.size(), size_t(out.rgb.width) * out.rgb.height * 3);
        ++decoded;
      } catch (const MediaError&) {
        ++refused;
      }
    }
    EXPECT_EQ(decoded + refused, 150) << image_format_name(format);
  }
}

TEST(HostileImage, CorruptHeaders) {
  Bytes png = valid_file(ImageFormat::kPng);
  png[29] ^= 0x40;  // IHDR's CRC
  expect_error(png, MediaErrorKind::kCorrupt, "PNG");
  expect_error(png_header_only(0, 10), MediaErrorKind::kCorrupt, "PNG");
  expect_error(png_header_only(10, 10, 8, 5), MediaErrorKind::kCorrupt, "PNG");  // no color type 5
  Bytes jpeg = valid_file(ImageFormat::kJpeg);
  for (size_t i = 2; i + 4 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      jpeg[i + 4] = 12;  // SOF0's sample precision: 12-bit, which an 8-bit build refuses
      break;
    }
  }
  expect_error(jpeg, MediaErrorKind::kCorrupt, "precision");
  Bytes webp = valid_file(ImageFormat::kWebP);
  webp[12] = 'X';  // an unknown first chunk
  expect_error(webp, MediaErrorKind::kCorrupt, "WebP");
  expect_error(test::encode_gif_8bit_codes(0, 0, {0, 0, 0, 9, 9, 9}, Bytes{}),
               MediaErrorKind::kCorrupt, "empty size");
  test::GifSpec no_frame;
  no_frame.width = no_frame.height = 4;
  expect_error(test::encode_gif(no_frame), MediaErrorKind::kCorrupt, "no frame");
}

TEST(HostileImage, TwoComponentJpegIsUnsupported) {
  test::JpegSpec s;
  s.width = 8, s.height = 8, s.components = 2;
  s.samples.assign(8 * 8 * 2, 100);
  expect_error(test::encode_jpeg(s), MediaErrorKind::kUnsupported, "2 components");
}

TEST(HostileImage, GarbageEmptyAndOtherFormats) {
  expect_error(Bytes{}, MediaErrorKind::kCorrupt, "empty");
  expect_error(Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'},
               MediaErrorKind::kUnsupported, "not a known image format");
  expect_error(Bytes{'B', 'M', 0x36, 0, 0, 0, 0, 0, 0, 0}, MediaErrorKind::kUnsupported, "BMP");
  expect_error(Bytes{'I', 'I', '*', 0, 8, 0, 0, 0}, MediaErrorKind::kUnsupported, "TIFF");
  expect_error(Bytes{'M', 'M', 0, '*', 0, 0, 0, 8}, MediaErrorKind::kUnsupported, "TIFF");
  expect_error(Bytes{0, 0, 0, 0x1c, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f'},
               MediaErrorKind::kUnsupported, "HEIF/AVIF");
  // A PNG signature followed by garbage.
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3, 4, 5, 6, 7, 8, 9};
  expect_error(png, MediaErrorKind::kCorrupt, "PNG");
}

}  // namespace hostile_input_test
}  // namespace tandem
