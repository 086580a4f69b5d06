// decode_image: encoded bytes -> RgbImage exactly as `PIL.Image.open(f)`, then
// `ImageOps.exif_transpose`, then `convert("RGB")` would give them (transformers'
// load_image does the first two; every HF image processor does the third).
//
//   PNG   every bit depth and color type, interlaced or not; 16-bit RGB(A) and gray+alpha
//         keep the high byte (PIL's RGB;16B / RGBA;16B / LA;16B unpackers), 16-bit gray is
//         clipped to 0..255 (PIL opens it as I;16, whose RGB conversion clips), 1/2/4-bit
//         gray is scaled to 0..255, palettes are expanded (entries past the PLTE are black),
//         tRNS is ignored and alpha dropped, not composited. No gamma or ICC handling (PIL
//         does none either).
//   JPEG  libjpeg-turbo's default decode (islow DCT, fancy upsampling), gray replicated,
//         4-component (CMYK/YCCK) inverted as Adobe writes it and converted as PIL does.
//   WebP  libwebp's animation decoder, as PIL uses it: the first frame on its canvas
//         (transparent where the frame does not cover it), alpha dropped.
//   GIF   the first frame on the logical screen as PIL composes it (mode P, or L when the
//         palette is the identity ramp), palette expanded.
// EXIF orientation 2..8 (JPEG APP1, PNG eXIf before IDAT, WebP EXIF chunk; XMP
// tiff:Orientation when EXIF has none) is applied as ImageOps.exif_transpose does.
//
// Bounds are checked before the memory they guard exists: the encoded size first, then
// width × height from the header. Every failure is a MediaError naming the format and the
// cause; nothing aborts or leaks.
#pragma once

#include <cstdint>
#include <span>

#include "media/image_format.h"
#include "media/media_limits.h"
#include "media/rgb_image.h"

namespace tandem {

struct DecodedImage {
  RgbImage rgb;           // after orientation: the size the processor sees
  ImageFormat format = ImageFormat::kUnknown;
  int orientation = 1;    // the EXIF orientation that was applied (1: none)
};

DecodedImage decode_image(std::span<const uint8_t> bytes, const MediaLimits& limits);

}  // namespace tandem
