// GIF through giflib: the first frame, composed as PIL's GifImagePlugin composes frame 0.
//   - The canvas is the logical screen, grown to hold the frame if the frame overhangs it.
//   - Pixels the frame does not cover hold the frame's transparent index when its graphic
//     control extension sets one, else index 0; the frame's own pixels are all written
//     (its transparent ones included).
//   - Indices map through the frame's palette (local, else global; entries past the table
//     are black), unless that palette is the identity gray ramp or there is none: then PIL
//     opens the image as "L" and the index itself is the gray level.
// Only records up to the first image are read: the rest of an animation costs nothing.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "media/decoders.h"
#include "media/media_error.h"

namespace tandem::media_detail {
namespace {

struct Source {
  std::span<const uint8_t> bytes;
  size_t cursor = 0;
};

int read_bytes(GifFileType* gif, GifByteType* out, int size) {
  auto* src = static_cast<Source*>(gif->UserData);
  const size_t n = std::min(size_t(size), src->bytes.size() - src->cursor);
  std::memcpy(out, src->bytes.data() + src->cursor, n);
  src->cursor += n;
  return int(n);  // short reads make giflib report D_GIF_ERR_READ_FAILED
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int error = 0;
    DGifCloseFile(gif, &error);
  }
};
using GifPtr = std::unique_ptr<GifFileType, GifCloser>;

[[noreturn]] void fail_gif(int error) {
  const char* text = GifErrorString(error);
  media_fail(MediaErrorKind::kCorrupt, "GIF image is corrupt: {}",
             text ? text : "unknown giflib error");
}

// Extensions before the first image; returns the transparent index of the last graphic
// control extension that sets one.
std::optional<int> read_extension(GifFileType* gif, std::optional<int> transparency) {
  int code = 0;
  GifByteType* block = nullptr;
  if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) fail_gif(gif->Error);
  if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4 && (block[1] & 1)) {
    transparency = block[4];
  }
  while (block) {
    if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) fail_gif(gif->Error);
  }
  return transparency;
}

// PIL's _is_palette_needed: false when entry i is (i, i, i) for every entry.
bool palette_needed(const ColorMapObject* map) {
  for (int i = 0; i < map->ColorCount; ++i) {
    const GifColorType& c = map->Colors[i];
    if (c.Red != i || c.Green != i || c.Blue != i) return true;
  }
  return false;
}

// Reads the frame's rows into `canvas` (indices, canvas_width wide) at its offset.
void read_frame(GifFileType* gif, std::vector<uint8_t>& canvas, int canvas_width) {
  const GifImageDesc& d = gif->Image;
  if (d.Width == 0 || d.Height == 0) return;
  std::vector<GifPixelType> line(size_t(d.Width));
  // Interlaced rows arrive in four passes: every 8th from 0, every 8th from 4, every 4th
  // from 2, every 2nd from 1.
  static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
  const int num_passes = d.Interlace ? 4 : 1;
  for (int pass = 0; pass < num_passes; ++pass) {
    const int start = d.Interlace ? kStart[pass] : 0;
    const int step = d.Interlace ? kStep[pass] : 1;
    for (int y = start; y < d.Height; y += step) {
      if (DGifGetLine(gif, line.data(), d.Width) == GIF_ERROR) fail_gif(gif->Error);
      uint8_t* dst = canvas.data() + size_t(d.Top + y) * size_t(canvas_width) + size_t(d.Left);
      std::memcpy(dst, line.data(), size_t(d.Width));
    }
  }
}

RgbImage to_rgb(const std::vector<uint8_t>& canvas, int width, int height,
                const ColorMapObject* map) {
  RgbImage rgb(width, height);
  const bool use_palette = map && palette_needed(map);
  for (size_t i = 0; i < canvas.size(); ++i) {
    uint8_t* out = rgb.pixels.data() + 3 * i;
    const int index = canvas[i];
    if (!use_palette) {
      out[0] = out[1] = out[2] = uint8_t(index);
    } else if (index < map->ColorCount) {
      out[0] = map->Colors[index].Red, out[1] = map->Colors[index].Green;
      out[2] = map->Colors[index].Blue;
    } else {
      out[0] = out[1] = out[2] = 0;
    }
  }
  return rgb;
}

}  // namespace

DecodedFrame decode_gif(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  Source src{bytes};
  int error = 0;
  GifPtr gif(DGifOpen(&src, read_bytes, &error));
  if (!gif) fail_gif(error);
  std::optional<int> transparency;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) fail_gif(gif->Error);
    if (type == TERMINATE_RECORD_TYPE) {
      media_fail(MediaErrorKind::kCorrupt, "GIF image is corrupt: it holds no frame");
    }
    if (type == EXTENSION_RECORD_TYPE) {
      transparency = read_extension(gif.get(), transparency);
    } else if (type == IMAGE_DESC_RECORD_TYPE) {
      break;
    }
  }
  if (DGifGetImageDesc(gif.get()) == GIF_ERROR) fail_gif(gif->Error);
  const GifImageDesc& d = gif->Image;
  if (d.Left < 0 || d.Top < 0 || d.Width < 0 || d.Height < 0) {
    media_fail(MediaErrorKind::kCorrupt, "GIF image is corrupt: negative frame geometry");
  }
  const uint64_t width = std::max<uint64_t>(uint64_t(gif->SWidth), uint64_t(d.Left) + d.Width);
  const uint64_t height = std::max<uint64_t>(uint64_t(gif->SHeight), uint64_t(d.Top) + d.Height);
  check_image_size("GIF", width, height, limits);
  std::vector<uint8_t> canvas(width * height, uint8_t(transparency.value_or(0)));
  read_frame(gif.get(), canvas, int(width));
  const ColorMapObject* map = d.ColorMap ? d.ColorMap : gif->SColorMap;
  DecodedFrame frame;
  frame.rgb = to_rgb(canvas, int(width), int(height), map);
  return frame;
}

}  // namespace tandem::media_detail
