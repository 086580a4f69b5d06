#include "model/vision/image_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace tandem {

const char* vision_family_name(VisionFamily f) {
  switch (f) {
    case VisionFamily::None:
      return "none";
    case VisionFamily::Gemma3:
      return "gemma3";
    case VisionFamily::Gemma4:
      return "gemma4";
  }
  return "none";
}

namespace {

std::optional<std::string> check_host_f32(const Tensor& t) {
  if (!t.defined() || t.device != Device::CPU || t.dtype != DType::F32)
    return "image pixels must be an f32 host tensor";
  return std::nullopt;
}

std::optional<std::string> check_gemma3(const VisionSpec& s, const ImageInput& im) {
  const int64_t S = s.image_size;
  if (!(im.pixels.shape == Shape{3, S, S}))
    return fmt::format("image pixels {} must be [3, {}, {}]", im.pixels.shape.str(), S, S);
  if (!im.position_ids.empty()) return std::string("a Gemma 3 image takes no patch positions");
  if (im.num_soft_tokens != s.soft_tokens_per_image)
    return fmt::format("image num_soft_tokens {} must be {}", im.num_soft_tokens,
                       s.soft_tokens_per_image);
  return std::nullopt;
}

// Every k×k cell of the patch grid (the pooler's kernel index: x/k + (max_x + 1)/k · (y/k))
// must hold exactly k² distinct patches, and the cells must be num_soft_tokens in all.
std::optional<std::string> check_cells(const VisionSpec& s, const ImageInput& im, int64_t n) {
  const int k = s.pooling_kernel_size;
  int32_t max_x = 0;
  for (int64_t i = 0; i < n; i++) max_x = std::max(max_x, im.position_ids[size_t(2 * i)]);
  const int64_t cells_per_row = (int64_t(max_x) + 1) / k;
  std::vector<int> count(size_t(im.num_soft_tokens), 0);
  std::unordered_set<int64_t> seen;
  for (int64_t i = 0; i < n; i++) {
    const int64_t x = im.position_ids[size_t(2 * i)], y = im.position_ids[size_t(2 * i + 1)];
    if (!seen.insert(x * s.max_patch_position + y).second)
      return fmt::format("image patch {} repeats position ({}, {})", i, x, y);
    const int64_t cell = x / k + cells_per_row * (y / k);
    if (x / k >= cells_per_row || cell >= im.num_soft_tokens)
      return fmt::format("image patch {} at ({}, {}) lies outside the {} soft tokens' {}x{} cells",
                         i, x, y, im.num_soft_tokens, k, k);
    count[size_t(cell)]++;
  }
  for (size_t c = 0; c < count.size(); c++)
    if (count[c] != k * k)
      return fmt::format("image soft token {} pools {} patches, not {}", c, count[c], k * k);
  return std::nullopt;
}

std::optional<std::string> check_gemma4(const VisionSpec& s, const ImageInput& im) {
  const int64_t width = 3 * int64_t(s.patch_size) * s.patch_size;
  if (im.pixels.ndim() != 2 || im.pixels.dim(1) != width || im.pixels.dim(0) <= 0)
    return fmt::format("image pixels {} must be [num_patches, {}]", im.pixels.shape.str(), width);
  const int64_t n = im.pixels.dim(0), k2 = int64_t(s.pooling_kernel_size) * s.pooling_kernel_size;
  if (int64_t(im.position_ids.size()) != 2 * n)
    return fmt::format("image position_ids has {} entries for {} patches (want {})",
                       im.position_ids.size(), n, 2 * n);
  for (size_t i = 0; i < im.position_ids.size(); i++)
    if (im.position_ids[i] < 0 || im.position_ids[i] >= s.max_patch_position)
      return fmt::format("image patch position {} is outside [0, {})", im.position_ids[i],
                         s.max_patch_position);
  if (im.num_soft_tokens <= 0 || n != k2 * im.num_soft_tokens)
    return fmt::format("image has {} patches for {} soft tokens (want {} per soft token)", n,
                       im.num_soft_tokens, k2);
  return check_cells(s, im, n);
}

}  // namespace

std::optional<std::string> check_image(const VisionSpec& spec, const ImageInput& image) {
  if (!spec.takes_images)
    return spec.refusal.empty() ? std::string("this model does not take images") : spec.refusal;
  if (auto bad = check_host_f32(image.pixels)) return bad;
  switch (spec.family) {
    case VisionFamily::Gemma3:
      return check_gemma3(spec, image);
    case VisionFamily::Gemma4:
      return check_gemma4(spec, image);
    case VisionFamily::None:
      break;
  }
  return std::string("this model does not take images");
}

}  // namespace tandem
