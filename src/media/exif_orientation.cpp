#include "media/exif_orientation.h"

#include <cstring>

namespace tandem {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;

// Bounds-checked reads in the block's byte order.
class TiffReader {
 public:
  TiffReader(std::span<const uint8_t> data, bool little) : data_(data), little_(little) {}

  bool has(uint64_t offset, uint64_t size) const {
    return offset <= data_.size() && size <= data_.size() - offset;
  }
  uint32_t u16(uint64_t at) const { return read(at, 2); }
  uint32_t u32(uint64_t at) const { return read(at, 4); }
  uint32_t read(uint64_t at, int size) const {
    uint32_t v = 0;
    for (int i = 0; i < size; ++i) {
      const uint32_t byte = data_[at + uint64_t(little_ ? size - 1 - i : i)];
      v = (v << 8) | byte;
    }
    return v;
  }

 private:
  std::span<const uint8_t> data_;
  bool little_;
};

// The first value of an integer-typed entry (PIL keeps values[0] of a one-value tag).
std::optional<int> entry_value(const TiffReader& tiff, uint64_t entry) {
  const uint32_t type = tiff.u16(entry + 2);
  const uint32_t count = tiff.u32(entry + 4);
  int unit = 0;
  switch (type) {
    case 1: case 6: unit = 1; break;   // BYTE, SBYTE
    case 3: case 8: unit = 2; break;   // SHORT, SSHORT
    case 4: case 9: unit = 4; break;   // LONG, SLONG
    default: return std::nullopt;      // not an integer: PIL finds no transpose for it
  }
  if (count == 0) return std::nullopt;
  uint64_t at = entry + 8;
  if (uint64_t(count) * uint64_t(unit) > 4) {
    at = tiff.u32(entry + 8);
    if (!tiff.has(at, uint64_t(count) * uint64_t(unit))) return std::nullopt;
  }
  uint32_t v = tiff.read(at, unit);
  if (type == 6) return int(int8_t(v));
  if (type == 8) return int(int16_t(v));
  if (type == 9 || v > 0x7fffffffu) return int(int32_t(v));
  return int(v);
}

// Rotations and mirrors; out has the size (ow, oh) and out(x, y) = in(src(x, y)).
template <typename Source>
RgbImage remap(const RgbImage& in, int ow, int oh, Source src) {
  RgbImage out(ow, oh);
  for (int y = 0; y < oh; ++y) {
    uint8_t* dst = out.row(y);
    for (int x = 0; x < ow; ++x, dst += 3) {
      const auto [sx, sy] = src(x, y);
      std::memcpy(dst, in.at(sx, sy), 3);
    }
  }
  return out;
}

}  // namespace

std::optional<int> exif_orientation(std::span<const uint8_t> exif) {
  if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
  if (exif.size() < 8) return std::nullopt;
  bool little;
  if (std::memcmp(exif.data(), "II*\0", 4) == 0) {
    little = true;
  } else if (std::memcmp(exif.data(), "MM\0*", 4) == 0) {
    little = false;
  } else {
    return std::nullopt;
  }
  const TiffReader tiff(exif, little);
  const uint64_t ifd = tiff.u32(4);
  if (!tiff.has(ifd, 2)) return std::nullopt;
  const uint32_t num_entries = tiff.u16(ifd);
  std::optional<int> orientation;  // a repeated tag: the last one wins, as in PIL's dict
  for (uint32_t i = 0; i < num_entries; ++i) {
    const uint64_t entry = ifd + 2 + uint64_t(i) * 12;
    if (!tiff.has(entry, 12)) break;
    if (tiff.u16(entry) == kOrientationTag) orientation = entry_value(tiff, entry);
  }
  return orientation;
}

std::optional<int> xmp_orientation(std::string_view xmp) {
  constexpr std::string_view kKey = "tiff:Orientation";
  for (size_t at = xmp.find(kKey); at != std::string_view::npos; at = xmp.find(kKey, at + 1)) {
    std::string_view rest = xmp.substr(at + kKey.size());
    if (rest.starts_with("=\"")) {
      rest.remove_prefix(2);
    } else if (rest.starts_with(">")) {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    if (!rest.empty() && rest[0] >= '0' && rest[0] <= '9') return rest[0] - '0';
  }
  return std::nullopt;
}

RgbImage apply_orientation(RgbImage image, int orientation) {
  const int w = image.width;
  const int h = image.height;
  using P = std::pair<int, int>;
  switch (orientation) {
    case 2: return remap(image, w, h, [&](int x, int y) { return P{w - 1 - x, y}; });
    case 3: return remap(image, w, h, [&](int x, int y) { return P{w - 1 - x, h - 1 - y}; });
    case 4: return remap(image, w, h, [&](int x, int y) { return P{x, h - 1 - y}; });
    // 5 TRANSPOSE: out(x, y) = in(y, x).
    case 5: return remap(image, h, w, [&](int x, int y) { return P{y, x}; });
    // 6 ROTATE_270 (clockwise): the input's top-left lands top-right.
    case 6: return remap(image, h, w, [&](int x, int y) { return P{y, h - 1 - x}; });
    // 7 TRANSVERSE: out(x, y) = in(w-1-y, h-1-x).
    case 7: return remap(image, h, w, [&](int x, int y) { return P{w - 1 - y, h - 1 - x}; });
    // 8 ROTATE_90 (counter-clockwise): the input's top-right lands top-left.
    case 8: return remap(image, h, w, [&](int x, int y) { return P{w - 1 - y, x}; });
    default: return image;
  }
}

}  // namespace tandem
