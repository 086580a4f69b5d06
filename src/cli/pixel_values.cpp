#include "cli/pixel_values.h"

#include <cstring>

#include "core/error.h"
#include "loader/safetensors.h"
#include "model/vision/image_check.h"

namespace tandem::cli {

namespace {

// FNV-1a over bytes, chained: the test hook's content hash (the media module hashes the
// decoded pixels instead).
uint64_t fnv(const void* data, size_t n, uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

Tensor host_copy(const Tensor& t) {
  Tensor out = Tensor::empty_host(t.dtype, t.shape);
  std::memcpy(out.data, t.data, t.nbytes());
  return out;
}

}  // namespace

std::vector<MediaSpan> media_from_pixel_values(const std::filesystem::path& file,
                                               std::span<const int32_t> ids,
                                               const VisionSpec& vision) {
  if (!vision.takes_images)
    fail("--pixel-values: {}",
         vision.refusal.empty() ? "the model takes no images" : vision.refusal);
  auto st = SafetensorsFile::open(file);
  std::vector<MediaSpan> media;
  for (size_t p = 0; p < ids.size();) {
    if (ids[p] != vision.image_token_id) {
      p++;
      continue;
    }
    size_t end = p;
    while (end < ids.size() && ids[end] == vision.image_token_id) end++;
    const std::string j = std::to_string(media.size());
    if (!st->has("pixel_values." + j))
      fail("{}: no tensor 'pixel_values.{}' for the image tokens at [{}, {})", file.string(), j, p,
           end);
    auto image = std::make_shared<ImageInput>();
    image->pixels = host_copy(st->tensor("pixel_values." + j));
    if (image->pixels.dtype != DType::F32)
      fail("{}: 'pixel_values.{}' must be f32", file.string(), j);
    if (st->has("image_position_ids." + j)) {
      const Tensor pos = st->tensor("image_position_ids." + j);
      if (pos.dtype != DType::I32)
        fail("{}: 'image_position_ids.{}' must be i32", file.string(), j);
      image->position_ids.assign(pos.ptr<int32_t>(), pos.ptr<int32_t>() + pos.numel());
    }
    image->num_soft_tokens = int(end - p);
    image->content_hash = fnv(
        image->pixels.data, image->pixels.nbytes(),
        fnv(image->position_ids.data(), image->position_ids.size() * 4, 1469598103934665603ull));
    if (auto bad = check_image(vision, *image))
      fail("{}: image {} (tokens [{}, {})): {}", file.string(), j, p, end, *bad);
    media.push_back({int32_t(p), int32_t(end - p), std::move(image)});
    p = end;
  }
  if (st->has("pixel_values." + std::to_string(media.size())))
    fail("{}: more images than image-token runs in the ids ({})", file.string(), media.size());
  return media;
}

}  // namespace tandem::cli
