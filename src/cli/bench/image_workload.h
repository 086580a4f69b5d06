// `tandem bench --image WxH`: an image workload for any OpenAI-compatible server. Requests
// go to /v1/chat/completions as one user message: K synthetic PNG images (data: URLs) and
// the prompt as text. Each image is drawn from (seed, request, k), so no two requests share
// an image and no encoder or prefix cache can hit across them, unless --same-image asks
// for one image everywhere. --image-fraction F gives images to F of the requests (spread
// evenly); the others send the same text alone, so both kinds are measured in one run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "media/rgb_image.h"

namespace tandem::cli::bench {

struct ImageWorkload {
  int width = 0;  // 0: no images (the plain /v1/completions workload)
  int height = 0;
  int per_request = 1;      // --images-per-request
  double fraction = 1.0;    // --image-fraction
  bool same_image = false;  // --same-image
  uint64_t seed = 0;

  bool on() const { return width > 0; }
  // Whether request i carries images: floor(i·F) steps up at i, so F of them, spread evenly
  // (index -1, the warm-up request, carries them whenever F > 0).
  bool carries(int i) const;
};

// "896x896" → {896, 896}; throws tandem::Error naming --image otherwise.
std::pair<int, int> parse_image_size(const std::string& text);

// A smooth picture with a few blocks, all drawn from `seed`: distinct pixels per seed, and
// small as a PNG.
RgbImage synthetic_image(int width, int height, uint64_t seed);

// The text a token-id prompt stands for: one common short word per id (most tokenizers
// make each one token, so the text is about as long as the ids).
std::string prompt_words(const std::vector<int32_t>& ids);

// Request `index`'s content parts: its images (when it carries them) as data: URLs, then
// the text. As JSON text, to splice into the request body.
std::string image_content_json(const ImageWorkload& w, int index, const std::string& text);

}  // namespace tandem::cli::bench
