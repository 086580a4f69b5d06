// Pillow's resize (libImaging/Resample.c, Image.resize) reimplemented for RGB images, bit
// for bit:
//   - separable filters (box, bilinear, hamming, bicubic a = -0.5, lanczos 3) whose support
//     widens by the downscale factor, so a downscale averages every input pixel;
//   - per output pixel, the taps [xmin, xmin + n) around center = (x + 0.5) * scale, the
//     weights normalized to sum 1, then made 22-bit fixed point (PRECISION_BITS = 32-8-2,
//     rounded half away from zero);
//   - the horizontal pass first (only over the rows the vertical pass will read), rounding
//     and clipping to 8 bits, then the vertical pass, rounding and clipping again;
//   - Pillow >= 12.2: an image more than 100 times taller than wide that shrinks in height
//     is resized vertically first, then horizontally;
//   - nearest is not a filter but PIL's affine nearest-neighbour scale (the source pixel
//     at (x + 0.5) * scale, accumulated in double as PIL accumulates it).
// No reducing_gap (box-reduce first): transformers' PIL backends never pass one.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "media/rgb_image.h"

namespace tandem {

// PIL's Image.Resampling numbering, as processor configs store it in "resample".
enum class ResampleFilter {
  kNearest = 0,
  kLanczos = 1,
  kBilinear = 2,
  kBicubic = 3,
  kBox = 4,
  kHamming = 5,
};

std::optional<ResampleFilter> resample_filter_from_pil(int value);
std::string_view resample_filter_name(ResampleFilter filter);

// PIL's image.resize((width, height), resample=filter); a same-size resize is a copy.
RgbImage resize_like_pil(const RgbImage& image, int width, int height, ResampleFilter filter);

// One axis of a resize (not for kNearest): PIL's precompute_coeffs.
struct ResampleTaps {
  int ksize = 0;               // stride of `weights`: the most taps any output pixel has
  std::vector<int> first;      // [out_size] first input index
  std::vector<int> count;      // [out_size] number of taps
  std::vector<double> weights; // [out_size, ksize] normalized; unused entries are 0
};
ResampleTaps resample_taps(int in_size, int out_size, ResampleFilter filter);

// PIL's normalize_coeffs_8bpc: (int)(w * 2^22 ± 0.5).
std::vector<int32_t> fixed_point_weights(const std::vector<double>& weights);

// The filter's kernel value at x (in input pixels of a 1:1 scale); its support radius.
double resample_kernel(ResampleFilter filter, double x);
double resample_support(ResampleFilter filter);

}  // namespace tandem
