// MediaLimits: the bounds on one image of a request, checked before the memory they guard
// is allocated. The server exposes them as flags (--max-image-bytes, --max-image-pixels,
// --max-images-per-request); the defaults are in the range vLLM and llama.cpp use.
#pragma once

#include <cstdint>

namespace tandem {

struct MediaLimits {
  // Encoded bytes of one image (after base64 decoding).
  uint64_t max_image_bytes = 20ull << 20;  // 20 MiB
  // width × height as the file's header declares it (for a GIF, the canvas its first frame
  // needs), refused before any pixel buffer exists. 50 Mpx is about 150 MB of RGB.
  uint64_t max_image_pixels = 50'000'000;
  // Either side: JPEG's, GIF's and WebP's own maximum is at most this, and it bounds the
  // resampler's coefficient tables (about 2 × filter support × side entries).
  uint32_t max_image_side = 65535;
  // Images in one request (counting each image once; Gemma 3's pan-and-scan crops are not
  // counted). Enforced by the server, which sees the whole request.
  int max_images_per_request = 16;
};

}  // namespace tandem
