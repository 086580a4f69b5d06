// Encoders for the media tests: small PNG/JPEG/WebP/GIF files written in memory with the
// same Debian libraries the decoders use, so each test states its pixels and the semantics
// it expects (PIL's) instead of shipping binary fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "media/rgb_image.h"

namespace tandem::test {

using Bytes = std::vector<uint8_t>;

// A deterministic image with every channel varying (smooth plus a little noise).
RgbImage pattern_image(int width, int height, uint32_t seed);

struct PngSpec {
  int width = 0, height = 0;
  int bit_depth = 8;
  int color_type = 2;  // PNG_COLOR_TYPE_*: 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
  Bytes samples;       // rows as PNG stores them unpacked: one byte per sample (two,
                       // big-endian, at depth 16); depth < 8 holds one sample per byte
  std::vector<uint8_t> palette;  // RGB triplets (color type 3)
  std::vector<uint8_t> trns;     // raw tRNS chunk contents, if any
  bool interlace = false;
  Bytes exif;                    // an eXIf chunk, if any
};
Bytes encode_png(const PngSpec& spec);
// 8-bit RGB convenience.
Bytes encode_png_rgb(const RgbImage& image, bool interlace = false);

struct JpegSpec {
  int width = 0, height = 0;
  int components = 3;  // 1 gray, 3 RGB (stored YCbCr), 4 CMYK (values written as given),
                       // others written as components of an unknown color space
  Bytes samples;       // [height, width, components]
  int quality = 95;
  bool progressive = false;
  Bytes app1;          // an APP1 segment's contents (e.g. "Exif\0\0" + TIFF), if any
};
Bytes encode_jpeg(const JpegSpec& spec);
Bytes encode_jpeg_rgb(const RgbImage& image, int quality = 95, const Bytes& app1 = {});

// A TIFF block ("Exif\0\0" prefixed) whose IFD0 holds one orientation SHORT.
Bytes exif_with_orientation(int orientation, bool little_endian = true);

// WebP: lossless (exact: RGB kept under transparent pixels) or lossy, RGB or RGBA input
// ([h, w, 3] or [h, w, 4]).
Bytes encode_webp(const Bytes& pixels, int width, int height, int channels, bool lossless);
// An animation: frames (RGBA, each the canvas size), the first drawn at full size.
Bytes encode_webp_animation(const std::vector<Bytes>& rgba_frames, int width, int height);

struct GifFrame {
  int left = 0, top = 0, width = 0, height = 0;
  Bytes indices;                 // [height, width]
  std::vector<uint8_t> palette;  // local color table (RGB triplets, 2^n entries), if any
  int transparent = -1;          // graphic control extension's transparent index
  bool interlace = false;
};
struct GifSpec {
  int width = 0, height = 0;             // logical screen
  std::vector<uint8_t> global_palette;   // RGB triplets (2^n entries), if any
  std::vector<GifFrame> frames;
};
Bytes encode_gif(const GifSpec& spec);
// A one-frame GIF whose LZW stream uses 8-bit codes whatever the palette's size (giflib's
// encoder masks indices to the palette's bits; this one can store indices past the table).
// `palette` must hold 2^n RGB triplets.
Bytes encode_gif_8bit_codes(int width, int height, const std::vector<uint8_t>& palette,
                            const Bytes& indices);

}  // namespace tandem::test
