// JPEG through libjpeg-turbo, converted to RGB as PIL's JpegImagePlugin + convert("RGB") do:
// the library's default decode (islow DCT, fancy upsampling), 1 component -> L, 3 -> RGB (the
// library picks YCbCr or RGB from the JFIF/Adobe markers), 4 -> CMYK, which PIL reads as
// Adobe writes it (inverted, "CMYK;I") and converts with its cmyk2rgb.
//
// libjpeg reports errors by longjmp to the setjmp in decode_jpeg; as in png_decoder.cpp,
// memory is owned by JpegContext only. Warnings are ignored as PIL ignores them, except
// the end of data inside the image, which PIL reports as a truncated file.
#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "media/decoders.h"
#include "media/media_error.h"

namespace tandem::media_detail {
namespace {

// A progressive file may hold any number of scans, each a pass over the whole image; past
// this many the file is refused (libjpeg-turbo's own tools use the same kind of cap).
constexpr int kMaxScans = 500;

struct JpegContext {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump;
  std::string error;
  bool created = false;
  std::vector<uint8_t> row;
  DecodedFrame frame;

  ~JpegContext() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegContext& context_of(j_common_ptr cinfo) {
  return *static_cast<JpegContext*>(cinfo->client_data);
}

void on_error(j_common_ptr cinfo) {
  char message[JMSG_LENGTH_MAX];
  cinfo->err->format_message(cinfo, message);
  JpegContext& ctx = context_of(cinfo);
  ctx.error = message;
  std::longjmp(ctx.jump, 1);
}

void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegContext& ctx = context_of(cinfo);
    ctx.error = "file is truncated";
    std::longjmp(ctx.jump, 1);
  }
}

void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->is_decompressor && d->input_scan_number > kMaxScans) {
    JpegContext& ctx = context_of(cinfo);
    ctx.error = "more than 500 progressive scans";
    std::longjmp(ctx.jump, 1);
  }
}

// EXIF as PIL collects it: the first "Exif\0\0" APP1 whole, later ones appended without
// their prefix; XMP: the last APP1 of Adobe's namespace, after its NUL-terminated name.
void collect_metadata(JpegContext& ctx) {
  static constexpr char kXmp[] = "http://ns.adobe.com/xap/1.0/";
  for (jpeg_saved_marker_ptr m = ctx.cinfo.marker_list; m; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    if (m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      const size_t skip = ctx.frame.exif.empty() ? 0 : 6;
      ctx.frame.exif.insert(ctx.frame.exif.end(), m->data + skip, m->data + m->data_length);
    } else if (m->data_length >= sizeof(kXmp) &&
               std::memcmp(m->data, kXmp, sizeof(kXmp)) == 0) {
      ctx.frame.xmp.assign(reinterpret_cast<const char*>(m->data) + sizeof(kXmp),
                           m->data_length - sizeof(kXmp));
    }
  }
}

void read_header(JpegContext& ctx, std::span<const uint8_t> bytes, const MediaLimits& limits) {
  jpeg_mem_src(&ctx.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&ctx.cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&ctx.cinfo, TRUE);
  check_image_size("JPEG", ctx.cinfo.image_width, ctx.cinfo.image_height, limits);
  const int components = ctx.cinfo.num_components;
  if (components != 1 && components != 3 && components != 4) {
    media_fail(MediaErrorKind::kUnsupported, "JPEG images with {} components are not supported",
               components);
  }
  ctx.cinfo.out_color_space = components == 1 ? JCS_GRAYSCALE
                              : components == 3 ? JCS_RGB
                                                : JCS_CMYK;
  // Progressive files buffer every coefficient (2 bytes each); bound libjpeg's pool by the
  // pixel bound rather than by the header of this particular file.
  const uint64_t pool = std::min<uint64_t>(limits.max_image_pixels, uint64_t(1) << 40) * 8;
  ctx.cinfo.mem->max_memory_to_use = long(pool + (64u << 20));
  collect_metadata(ctx);
}

// PIL: "CMYK;I" inverts the four channels, then cmyk2rgb with its rounding MULDIV255.
void cmyk_row_to_rgb(const uint8_t* in, uint8_t* out, int width) {
  for (int x = 0; x < width; ++x, in += 4, out += 3) {
    const int k = 255 - in[3];
    const int nk = 255 - k;
    for (int c = 0; c < 3; ++c) {
      const int tmp = (255 - in[c]) * nk + 128;
      const int v = nk - (((tmp >> 8) + tmp) >> 8);
      out[c] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

void read_pixels(JpegContext& ctx) {
  jpeg_start_decompress(&ctx.cinfo);
  const int width = int(ctx.cinfo.output_width);
  const int height = int(ctx.cinfo.output_height);
  const int components = ctx.cinfo.output_components;
  ctx.frame.rgb = RgbImage(width, height);
  ctx.row.resize(size_t(width) * size_t(components));
  while (int(ctx.cinfo.output_scanline) < height) {
    const int y = int(ctx.cinfo.output_scanline);
    JSAMPROW row = components == 3 ? ctx.frame.rgb.row(y) : ctx.row.data();
    if (jpeg_read_scanlines(&ctx.cinfo, &row, 1) != 1) {
      ctx.error = "no scanline";
      std::longjmp(ctx.jump, 1);
    }
    uint8_t* out = ctx.frame.rgb.row(y);
    if (components == 1) {
      for (int x = 0; x < width; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = row[x];
    } else if (components == 4) {
      cmyk_row_to_rgb(row, out, width);
    }
  }
  // The rest of the file (trailing markers) is not read: PIL stops at the last row too.
  jpeg_abort_decompress(&ctx.cinfo);
}

}  // namespace

DecodedFrame decode_jpeg(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  JpegContext ctx;
  ctx.cinfo.err = jpeg_std_error(&ctx.err);
  ctx.err.error_exit = on_error;
  ctx.err.emit_message = on_message;
  if (setjmp(ctx.jump)) {
    media_fail(MediaErrorKind::kCorrupt, "JPEG image is corrupt: {}", ctx.error);
  }
  ctx.cinfo.client_data = &ctx;  // kept by jpeg_create_decompress
  jpeg_create_decompress(&ctx.cinfo);
  ctx.created = true;
  ctx.progress.progress_monitor = on_progress;
  ctx.cinfo.progress = &ctx.progress;
  read_header(ctx, bytes, limits);
  read_pixels(ctx);
  return std::move(ctx.frame);
}

}  // namespace tandem::media_detail
