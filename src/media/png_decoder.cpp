// PNG through libpng, converted to RGB as PIL's PngImagePlugin + convert("RGB") do.
//
// libpng reports errors by longjmp to the setjmp in decode_png. Everything that owns memory
// lives in PngContext, created before the setjmp and destroyed by normal C++ unwinding after
// it; the functions libpng can longjmp out of (read_header, read_pixels) own nothing.
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "media/decoders.h"
#include "media/media_error.h"

namespace tandem::media_detail {
namespace {

struct PngContext {
  std::span<const uint8_t> bytes;
  size_t cursor = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  int bit_depth = 0;   // as the file stores them (libpng reports the transformed ones
  int color_type = 0;  // after png_read_update_info)
  std::string error;
  std::vector<uint8_t> rows;  // one native row, or the whole image when interlaced
  DecodedFrame frame;

  explicit PngContext(std::span<const uint8_t> b) : bytes(b) {}
  ~PngContext() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

void on_error(png_structp png, png_const_charp message) {
  auto* ctx = static_cast<PngContext*>(png_get_error_ptr(png));
  ctx->error = message;
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep out, size_t size) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  if (size > ctx->bytes.size() - ctx->cursor) png_error(png, "file is truncated");
  std::memcpy(out, ctx->bytes.data() + ctx->cursor, size);
  ctx->cursor += size;
}

// The chunks whose content PIL's RGB conversion never uses; libpng skips them instead of
// decompressing them (zTXt/iTXt/iCCP are where PNG decompression bombs hide besides IDAT).
void ignore_metadata_chunks(png_structp png) {
  static const png_byte kIgnored[] = "tEXt\0zTXt\0iTXt\0iCCP\0sPLT\0";
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, kIgnored, 5);
  png_set_chunk_malloc_max(png, 16u << 20);
}

// The header, then the transforms that make each row one of: gray 8 (1/2/4-bit unpacked but
// not yet scaled), gray 16 big-endian, gray+alpha 8, palette indices, RGB 8, RGBA 8.
void read_header(PngContext& ctx, const MediaLimits& limits) {
  png_set_sig_bytes(ctx.png, 0);
  png_read_info(ctx.png, ctx.info);
  check_image_size("PNG", png_get_image_width(ctx.png, ctx.info),
                   png_get_image_height(ctx.png, ctx.info), limits);
  const int depth = ctx.bit_depth = png_get_bit_depth(ctx.png, ctx.info);
  const int color = ctx.color_type = png_get_color_type(ctx.png, ctx.info);
  if (depth < 8) png_set_packing(ctx.png);
  // PIL keeps the high byte of 16-bit RGB(A) and gray+alpha (libpng's strip_16 "chops"
  // the same way); 16-bit gray it clips instead, so that one stays 16-bit.
  if (depth == 16 && color != PNG_COLOR_TYPE_GRAY) png_set_strip_16(ctx.png);
  png_uint_32 num_exif = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(ctx.png, ctx.info, &num_exif, &exif) && exif) {
    ctx.frame.exif.assign(exif, exif + num_exif);
  }
}

// PIL's 1/2/4-bit gray unpackers scale to 0..255 (1-bit is mode "1": 0 or 255).
uint8_t gray_scale(int depth) {
  return depth == 1 ? 255 : depth == 2 ? 0x55 : depth == 4 ? 0x11 : 1;
}

void convert_row(const PngContext& ctx, const uint8_t* in, uint8_t* out, int width) {
  const int color = ctx.color_type;
  const int depth = ctx.bit_depth;
  if (color == PNG_COLOR_TYPE_PALETTE) {
    png_colorp palette = nullptr;
    int num_palette = 0;
    png_get_PLTE(ctx.png, ctx.info, &palette, &num_palette);
    for (int x = 0; x < width; ++x, out += 3) {
      const int i = in[x];
      if (palette && i < num_palette) {
        out[0] = palette[i].red, out[1] = palette[i].green, out[2] = palette[i].blue;
      } else {
        out[0] = out[1] = out[2] = 0;  // PIL's palette is zero past the PLTE's entries
      }
    }
  } else if (color == PNG_COLOR_TYPE_GRAY && depth == 16) {
    for (int x = 0; x < width; ++x, out += 3) {
      const uint8_t v = in[2 * x] == 0 ? in[2 * x + 1] : 255;  // PIL's I;16 -> RGB clips
      out[0] = out[1] = out[2] = v;
    }
  } else if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) {
    const int step = color == PNG_COLOR_TYPE_GRAY ? 1 : 2;
    const uint8_t scale = gray_scale(depth);
    for (int x = 0; x < width; ++x, out += 3) out[0] = out[1] = out[2] = in[x * step] * scale;
  } else {
    const int step = color == PNG_COLOR_TYPE_RGB ? 3 : 4;
    for (int x = 0; x < width; ++x, out += 3) std::memcpy(out, in + x * step, 3);
  }
}

void read_pixels(PngContext& ctx) {
  const int passes = png_set_interlace_handling(ctx.png);
  png_read_update_info(ctx.png, ctx.info);
  const int width = int(png_get_image_width(ctx.png, ctx.info));
  const int height = int(png_get_image_height(ctx.png, ctx.info));
  const size_t row_bytes = png_get_rowbytes(ctx.png, ctx.info);
  ctx.frame.rgb = RgbImage(width, height);
  if (passes == 1) {
    ctx.rows.resize(row_bytes);
    for (int y = 0; y < height; ++y) {
      png_read_row(ctx.png, ctx.rows.data(), nullptr);
      convert_row(ctx, ctx.rows.data(), ctx.frame.rgb.row(y), width);
    }
    return;
  }
  // Adam7: each pass fills in pixels of rows the earlier passes wrote, so the native rows
  // are kept whole (at most 4 bytes per pixel after strip_16, 2 for 16-bit gray).
  ctx.rows.resize(row_bytes * size_t(height));
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < height; ++y) {
      png_read_row(ctx.png, ctx.rows.data() + row_bytes * size_t(y), nullptr);
    }
  }
  for (int y = 0; y < height; ++y) {
    convert_row(ctx, ctx.rows.data() + row_bytes * size_t(y), ctx.frame.rgb.row(y), width);
  }
}

// The IHDR's size, read before libpng sees the file: png_read_info goes on to read every
// chunk up to the first IDAT, so the bound must be checked from the header's bytes first.
// (A file whose first chunk is not IHDR is left to libpng to refuse.)
void check_ihdr_size(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  if (bytes.size() < 24 || std::memcmp(bytes.data() + 12, "IHDR", 4) != 0) return;
  auto be32 = [&](size_t at) {
    return uint32_t(bytes[at]) << 24 | uint32_t(bytes[at + 1]) << 16 |
           uint32_t(bytes[at + 2]) << 8 | uint32_t(bytes[at + 3]);
  };
  check_image_size("PNG", be32(16), be32(20), limits);
}

}  // namespace

DecodedFrame decode_png(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  check_ihdr_size(bytes, limits);
  PngContext ctx(bytes);
  ctx.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, on_error, on_warning);
  if (ctx.png) ctx.info = png_create_info_struct(ctx.png);
  if (!ctx.png || !ctx.info) media_fail(MediaErrorKind::kCorrupt, "PNG decoder: out of memory");
  if (setjmp(png_jmpbuf(ctx.png))) {
    media_fail(MediaErrorKind::kCorrupt, "PNG image is corrupt: {}", ctx.error);
  }
  png_set_read_fn(ctx.png, &ctx, read_bytes);
  // The pixel bound is ours (check_image_size); libpng's own default is 1,000,000 a side.
  png_set_user_limits(ctx.png, 0x7fffffffu, 0x7fffffffu);
  ignore_metadata_chunks(ctx.png);
  read_header(ctx, limits);
  read_pixels(ctx);
  return std::move(ctx.frame);
}

}  // namespace tandem::media_detail
