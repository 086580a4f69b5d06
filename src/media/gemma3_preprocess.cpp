// Gemma3ImageProcessorPil._preprocess for one image: PIL resize of the uint8 RGB image,
// then numpy's rescale (uint8 -> float64 × factor -> float32) and normalize (float32
// (x - mean) / std per channel), channels first.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/content_hash.h"
#include "media/preprocess.h"

namespace tandem::media_detail {
namespace {

RgbImage crop(const RgbImage& image, int x0, int y0, int width, int height) {
  RgbImage out(width, height);
  for (int y = 0; y < height; ++y) {
    std::memcpy(out.row(y), image.at(x0, y0 + y), out.row_bytes());
  }
  return out;
}

// The number of crops along the long side, as the processor computes it in Python floats.
int num_crops_along(int long_side, int short_side, const PanAndScanConfig& config) {
  int n = int(std::floor(double(long_side) / short_side + 0.5));
  n = std::min(int(std::floor(double(long_side) / config.min_crop_size)), n);
  n = std::max(2, n);
  return std::min(config.max_num_crops, n);
}

}  // namespace

std::vector<RgbImage> pan_and_scan_crops(const RgbImage& image, const PanAndScanConfig& config) {
  const int width = image.width, height = image.height;
  int crops_w = 1, crops_h = 1;
  if (width >= height) {
    if (double(width) / height < config.min_ratio_to_activate) return {};
    crops_w = num_crops_along(width, height, config);
  } else {
    if (double(height) / width < config.min_ratio_to_activate) return {};
    crops_h = num_crops_along(height, width, config);
  }
  const int crop_w = int(std::ceil(double(width) / crops_w));
  const int crop_h = int(std::ceil(double(height) / crops_h));
  if (std::min(crop_w, crop_h) < config.min_crop_size) return {};
  std::vector<RgbImage> crops;
  for (int i = 0; i < crops_h; ++i) {
    for (int j = 0; j < crops_w; ++j) {
      // numpy slicing clips the last crop at the image's edge.
      const int x0 = crop_w * j, y0 = crop_h * i;
      crops.push_back(crop(image, x0, y0, std::min(crop_w, width - x0),
                           std::min(crop_h, height - y0)));
    }
  }
  return crops;
}

ImageInput preprocess_gemma3(const RgbImage& image, const ImageProcessorConfig& config) {
  const RgbImage resized = config.do_resize
                               ? resize_like_pil(image, config.width, config.height, config.resample)
                               : image;
  const int h = resized.height, w = resized.width;
  ImageInput input;
  input.pixels = Tensor::empty_host(DType::F32, Shape{3, h, w});
  float* out = input.pixels.ptr<float>();
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < h; ++y) {
      const uint8_t* src = resized.row(y) + c;
      for (int x = 0; x < w; ++x, src += 3) {
        float v = config.do_rescale ? float(double(*src) * config.rescale_factor) : float(*src);
        if (config.do_normalize) v = (v - config.image_mean[size_t(c)]) / config.image_std[size_t(c)];
        *out++ = v;
      }
    }
  }
  input.num_soft_tokens = config.image_seq_length;
  input.content_hash = content_hash(image);
  return input;
}

}  // namespace tandem::media_detail
