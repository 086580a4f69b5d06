// Gemma4ImageProcessorPil._preprocess for one image: the aspect-preserving resize, rescale
// (and normalize when the config asks), then convert_image_to_patches and the patch grid's
// (x, y) positions. The processor pads every image to max_soft_tokens × pooling² patches
// with zeros at position (-1, -1); tandem does not: the encoder takes the real patches only
// (HF's encoder masks the padding out of attention and pooling, so it contributes nothing).
#include <algorithm>
#include <cmath>

#include "media/content_hash.h"
#include "media/media_error.h"
#include "media/preprocess.h"

namespace tandem::media_detail {

std::pair<int, int> gemma4_target_size(int height, int width, const ImageProcessorConfig& c) {
  // Python's arithmetic: ints exact, `/` a correctly rounded double.
  const int64_t max_patches = int64_t(c.max_soft_tokens) * c.pooling_kernel_size * c.pooling_kernel_size;
  const int64_t target_px = max_patches * c.patch_size * c.patch_size;
  const double factor = std::sqrt(double(target_px) / double(int64_t(height) * width));
  const double ideal_h = factor * height, ideal_w = factor * width;
  const int64_t side = int64_t(c.pooling_kernel_size) * c.patch_size;
  int64_t th = int64_t(std::floor(ideal_h / double(side))) * side;
  int64_t tw = int64_t(std::floor(ideal_w / double(side))) * side;
  if (th == 0 && tw == 0) {
    media_fail(MediaErrorKind::kInvalid, "image of {}x{} is too small to resize for the model",
               width, height);
  }
  const int64_t max_side = (max_patches / (int64_t(c.pooling_kernel_size) * c.pooling_kernel_size)) * side;
  if (th == 0) {
    th = side;
    tw = std::min(int64_t(std::floor(double(width) / height)) * side, max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min(int64_t(std::floor(double(height) / width)) * side, max_side);
  }
  if (th * tw > target_px) {
    media_fail(MediaErrorKind::kInvalid,
               "image of {}x{} is too elongated for the model (it would need {}x{} pixels, over "
               "its budget of {} patches)",
               width, height, tw, th, max_patches);
  }
  return {int(th), int(tw)};
}

ImageInput preprocess_gemma4(const RgbImage& image, const ImageProcessorConfig& c) {
  RgbImage resized;
  if (c.do_resize) {
    const auto [th, tw] = gemma4_target_size(image.height, image.width, c);
    resized = resize_like_pil(image, tw, th, c.resample);
  } else {
    resized = image;
  }
  const int p = c.patch_size;
  if (resized.width % p != 0 || resized.height % p != 0) {
    media_fail(MediaErrorKind::kInvalid, "image of {}x{} is not a whole number of {}-pixel patches",
               resized.width, resized.height, p);
  }
  const int ph = resized.height / p, pw = resized.width / p;
  const int num_patches = ph * pw;
  ImageInput input;
  input.pixels = Tensor::empty_host(DType::F32, Shape{num_patches, 3 * p * p});
  input.position_ids.resize(size_t(num_patches) * 2);
  float* out = input.pixels.ptr<float>();
  for (int py = 0; py < ph; ++py) {
    for (int px = 0; px < pw; ++px) {
      const size_t patch = size_t(py) * size_t(pw) + size_t(px);
      input.position_ids[2 * patch] = px;
      input.position_ids[2 * patch + 1] = py;
      for (int dy = 0; dy < p; ++dy) {
        const uint8_t* src = resized.at(px * p, py * p + dy);
        for (int i = 0; i < 3 * p; ++i) {
          float v = c.do_rescale ? float(double(src[i]) * c.rescale_factor) : float(src[i]);
          if (c.do_normalize) v = (v - c.image_mean[size_t(i % 3)]) / c.image_std[size_t(i % 3)];
          *out++ = v;
        }
      }
    }
  }
  const int pool = c.pooling_kernel_size * c.pooling_kernel_size;
  input.num_soft_tokens = num_patches / pool;
  input.content_hash = content_hash(image);
  return input;
}

}  // namespace tandem::media_detail
