// EXIF orientation: reading the tag (0x0112) from an EXIF block or an XMP packet, and
// applying it as PIL's ImageOps.exif_transpose does (2: mirror, 3: rotate 180, 4: flip,
// 5: transpose, 6: rotate 90° clockwise, 7: transverse, 8: rotate 90° counter-clockwise).
//
// The parser reads only IFD0 of the TIFF structure, every offset checked against the
// block; a malformed block yields no orientation rather than an error (PIL would raise
// from getexif; an unreadable orientation is not worth refusing the image for).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "media/rgb_image.h"

namespace tandem {

// The orientation value in IFD0 of a TIFF-structured EXIF block ("II*\0" or "MM\0*",
// optionally after "Exif\0\0"); nullopt when absent or unreadable. Values are returned as
// stored (the caller acts on 2..8 only).
std::optional<int> exif_orientation(std::span<const uint8_t> exif);

// PIL's XMP fallback: the digit after the first `tiff:Orientation="` or `tiff:Orientation>`.
std::optional<int> xmp_orientation(std::string_view xmp);

// The image as displayed: orientation 1 (or anything outside 2..8) returns it unchanged.
RgbImage apply_orientation(RgbImage image, int orientation);

}  // namespace tandem
