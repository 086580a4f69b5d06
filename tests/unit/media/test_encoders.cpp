#include "test_encoders.h"

#include <gif_lib.h>
#include <png.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <stdexcept>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

namespace tandem::test {

RgbImage pattern_image(int width, int height, uint32_t seed) {
  RgbImage im(width, height);
  uint32_t state = seed * 2654435761u + 1;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        state = state * 1664525u + 1013904223u;
        const int smooth = (x * (3 + c) * 255 / std::max(width, 1) + y * (5 - c) * 255 /
                            std::max(height, 1)) % 256;
        im.row(y)[3 * x + c] = uint8_t((smooth + int(state >> 28)) & 0xff);
      }
    }
  }
  return im;
}

// ---- PNG ----

namespace {
void png_write_bytes(png_structp png, png_bytep data, size_t size) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + size);
}
void png_flush(png_structp) {}

int png_channels(int color_type) {
  switch (color_type) {
    case 0: case 3: return 1;
    case 4: return 2;
    case 2: return 3;
    default: return 4;
  }
}

// Packs one row of unpacked samples into PNG's row format.
Bytes pack_row(const PngSpec& s, const uint8_t* samples) {
  const int n = s.width * png_channels(s.color_type);
  if (s.bit_depth == 8) return Bytes(samples, samples + n);
  if (s.bit_depth == 16) return Bytes(samples, samples + 2 * n);
  Bytes row(size_t((n * s.bit_depth + 7) / 8), 0);
  for (int i = 0; i < n; ++i) {
    const int bit = i * s.bit_depth;
    row[size_t(bit / 8)] |= uint8_t(samples[i] << (8 - s.bit_depth - bit % 8));
  }
  return row;
}
}  // namespace

Bytes encode_png(const PngSpec& s) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("encode_png failed");
  }
  png_set_write_fn(png, &out, png_write_bytes, png_flush);
  png_set_benign_errors(png, 1);
  png_set_check_for_invalid_index(png, 0);  // tests write indices past the palette
  png_set_IHDR(png, info, png_uint_32(s.width), png_uint_32(s.height), s.bit_depth,
               s.color_type, s.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> palette;
  for (size_t i = 0; i + 2 < s.palette.size(); i += 3) {
    palette.push_back({s.palette[i], s.palette[i + 1], s.palette[i + 2]});
  }
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), int(palette.size()));
  if (!s.trns.empty()) {
    if (s.color_type == 3) {
      png_set_tRNS(png, info, s.trns.data(), int(s.trns.size()), nullptr);
    } else {
      png_color_16 color{};
      color.gray = color.red = uint16_t(s.trns[0] << 8 | s.trns[1]);
      png_set_tRNS(png, info, nullptr, 0, &color);
    }
  }
  if (!s.exif.empty()) png_set_eXIf_1(png, info, png_uint_32(s.exif.size()), (png_bytep)s.exif.data());
  png_write_info(png, info);
  const int passes = png_set_interlace_handling(png);
  const size_t row_samples = size_t(s.width) * png_channels(s.color_type) * (s.bit_depth == 16 ? 2 : 1);
  std::vector<Bytes> rows;
  for (int y = 0; y < s.height; ++y) rows.push_back(pack_row(s, s.samples.data() + y * row_samples));
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < s.height; ++y) png_write_row(png, rows[size_t(y)].data());
  }
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return out;
}

Bytes encode_png_rgb(const RgbImage& image, bool interlace) {
  PngSpec s;
  s.width = image.width, s.height = image.height, s.color_type = 2, s.interlace = interlace;
  s.samples = image.pixels;
  return encode_png(s);
}

// ---- JPEG ----

Bytes encode_jpeg(const JpegSpec& s) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = JDIMENSION(s.width);
  cinfo.image_height = JDIMENSION(s.height);
  cinfo.input_components = s.components;
  cinfo.in_color_space = s.components == 1   ? JCS_GRAYSCALE
                         : s.components == 3 ? JCS_RGB
                         : s.components == 4 ? JCS_CMYK
                                             : JCS_UNKNOWN;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, s.quality, TRUE);
  if (s.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  if (!s.app1.empty()) jpeg_write_marker(&cinfo, JPEG_APP0 + 1, s.app1.data(), unsigned(s.app1.size()));
  const size_t stride = size_t(s.width) * s.components;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(s.samples.data() + cinfo.next_scanline * stride);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  Bytes out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

Bytes encode_jpeg_rgb(const RgbImage& image, int quality, const Bytes& app1) {
  JpegSpec s;
  s.width = image.width, s.height = image.height, s.components = 3;
  s.samples = image.pixels, s.quality = quality, s.app1 = app1;
  return encode_jpeg(s);
}

Bytes exif_with_orientation(int orientation, bool little) {
  Bytes b = {'E', 'x', 'i', 'f', 0, 0};
  auto u16 = [&](uint32_t v) {
    if (little) b.push_back(uint8_t(v)), b.push_back(uint8_t(v >> 8));
    else b.push_back(uint8_t(v >> 8)), b.push_back(uint8_t(v));
  };
  auto u32 = [&](uint32_t v) {
    if (little) { u16(v & 0xffff); u16(v >> 16); }
    else { u16(v >> 16); u16(v & 0xffff); }
  };
  b.push_back(little ? 'I' : 'M'), b.push_back(little ? 'I' : 'M');
  u16(42), u32(8);                          // IFD0 right after the header
  u16(1);                                   // one entry
  u16(0x0112), u16(3), u32(1), u16(uint32_t(orientation)), u16(0);
  u32(0);                                   // no next IFD
  return b;
}

// ---- WebP ----

Bytes encode_webp(const Bytes& pixels, int width, int height, int channels, bool lossless) {
  WebPConfig config;
  WebPConfigInit(&config);
  config.lossless = lossless ? 1 : 0;
  config.exact = 1;
  config.quality = lossless ? 50 : 80;
  WebPPicture pic;
  WebPPictureInit(&pic);
  pic.width = width, pic.height = height, pic.use_argb = lossless ? 1 : 0;
  const int ok = channels == 4 ? WebPPictureImportRGBA(&pic, pixels.data(), width * 4)
                               : WebPPictureImportRGB(&pic, pixels.data(), width * 3);
  if (!ok) throw std::runtime_error("WebPPictureImport failed");
  WebPMemoryWriter writer;
  WebPMemoryWriterInit(&writer);
  pic.writer = WebPMemoryWrite, pic.custom_ptr = &writer;
  if (!WebPEncode(&config, &pic)) throw std::runtime_error("WebPEncode failed");
  Bytes out(writer.mem, writer.mem + writer.size);
  WebPMemoryWriterClear(&writer);
  WebPPictureFree(&pic);
  return out;
}

Bytes encode_webp_animation(const std::vector<Bytes>& frames, int width, int height) {
  WebPAnimEncoderOptions options;
  WebPAnimEncoderOptionsInit(&options);
  WebPAnimEncoder* enc = WebPAnimEncoderNew(width, height, &options);
  WebPConfig config;
  WebPConfigInit(&config);
  config.lossless = 1, config.exact = 1;
  int timestamp = 0;
  for (const Bytes& rgba : frames) {
    WebPPicture pic;
    WebPPictureInit(&pic);
    pic.width = width, pic.height = height, pic.use_argb = 1;
    WebPPictureImportRGBA(&pic, rgba.data(), width * 4);
    if (!WebPAnimEncoderAdd(enc, &pic, timestamp, &config)) throw std::runtime_error("anim add");
    WebPPictureFree(&pic);
    timestamp += 100;
  }
  WebPAnimEncoderAdd(enc, nullptr, timestamp, nullptr);
  WebPData data;
  WebPDataInit(&data);
  if (!WebPAnimEncoderAssemble(enc, &data)) throw std::runtime_error("anim assemble");
  Bytes out(data.bytes, data.bytes + data.size);
  WebPDataClear(&data);
  WebPAnimEncoderDelete(enc);
  return out;
}

// ---- GIF ----

namespace {
int gif_write_bytes(GifFileType* gif, const GifByteType* data, int size) {
  auto* out = static_cast<Bytes*>(gif->UserData);
  out->insert(out->end(), data, data + size);
  return size;
}

ColorMapObject* make_map(const std::vector<uint8_t>& rgb) {
  if (rgb.empty()) return nullptr;
  const int n = int(rgb.size() / 3);
  std::vector<GifColorType> colors(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) colors[size_t(i)] = {rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]};
  return GifMakeMapObject(n, colors.data());
}

void check(int status, const char* what) {
  if (status == GIF_ERROR) throw std::runtime_error(what);
}
}  // namespace

Bytes encode_gif(const GifSpec& spec) {
  Bytes out;
  int error = 0;
  GifFileType* gif = EGifOpen(&out, gif_write_bytes, &error);
  if (!gif) throw std::runtime_error("EGifOpen failed");
  EGifSetGifVersion(gif, true);
  ColorMapObject* global = make_map(spec.global_palette);
  check(EGifPutScreenDesc(gif, spec.width, spec.height, 8, 0, global), "screen");
  for (const GifFrame& f : spec.frames) {
    if (f.transparent >= 0) {
      const GifByteType gce[4] = {1, 0, 0, GifByteType(f.transparent)};
      check(EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, gce), "gce");
    }
    ColorMapObject* local = make_map(f.palette);
    check(EGifPutImageDesc(gif, f.left, f.top, f.width, f.height, f.interlace, local), "desc");
    // EGifPutLine takes rows in file order: interlaced files store the four passes.
    std::vector<int> order;
    if (f.interlace) {
      for (int start : {0, 4, 2, 1}) {
        const int step = start == 0 ? 8 : start == 4 ? 8 : start == 2 ? 4 : 2;
        for (int y = start; y < f.height; y += step) order.push_back(y);
      }
    } else {
      for (int y = 0; y < f.height; ++y) order.push_back(y);
    }
    for (int y : order) {
      check(EGifPutLine(gif, const_cast<GifPixelType*>(f.indices.data() + size_t(y) * f.width),
                        f.width), "line");
    }
    GifFreeMapObject(local);
  }
  EGifCloseFile(gif, &error);
  GifFreeMapObject(global);
  return out;
}

Bytes encode_gif_8bit_codes(int width, int height, const std::vector<uint8_t>& palette,
                            const Bytes& indices) {
  int bits = 1;
  while ((3 << bits) < int(palette.size())) ++bits;
  Bytes out = {'G', 'I', 'F', '8', '9', 'a'};
  auto u16 = [&](int v) { out.push_back(uint8_t(v)), out.push_back(uint8_t(v >> 8)); };
  u16(width), u16(height);
  out.insert(out.end(), {uint8_t(0x80 | 0x70 | (bits - 1)), 0, 0});
  out.insert(out.end(), palette.begin(), palette.end());
  out.push_back(',');
  u16(0), u16(0), u16(width), u16(height);
  out.push_back(0);
  out.push_back(8);  // LZW minimum code size
  // "Uncompressed" LZW: 9-bit literal codes, with a clear code before the table would grow
  // past 511 entries (so the code width never changes).
  Bytes lzw;
  uint32_t acc = 0;
  int nbits = 0;
  auto put = [&](int code) {
    acc |= uint32_t(code) << nbits, nbits += 9;
    while (nbits >= 8) lzw.push_back(uint8_t(acc)), acc >>= 8, nbits -= 8;
  };
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i % 250 == 0) put(256);
    put(indices[i]);
  }
  put(257);
  if (nbits > 0) lzw.push_back(uint8_t(acc));
  for (size_t i = 0; i < lzw.size(); i += 255) {
    const size_t n = std::min<size_t>(255, lzw.size() - i);
    out.push_back(uint8_t(n));
    out.insert(out.end(), lzw.begin() + int64_t(i), lzw.begin() + int64_t(i + n));
  }
  out.push_back(0);
  out.push_back(';');
  return out;
}

}  // namespace tandem::test
