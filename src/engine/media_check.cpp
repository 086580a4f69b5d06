#include "engine/media_check.h"

#include <fmt/format.h>

#include "model/vision/image_check.h"

namespace tandem {

namespace {

// Each span in order, inside the prompt, of its image's soft tokens, all placeholders.
std::optional<std::string> check_span(const GenerationRequest& r, const VisionSpec& v, size_t i,
                                      int prev_end) {
  const MediaSpan& m = r.media[i];
  const int n = int(r.prompt.size());
  if (!m.image) return fmt::format("image {} has no pixels", i);
  if (m.length <= 0 || m.length != m.image->num_soft_tokens)
    return fmt::format("image {}: its span has {} tokens for {} soft tokens", i, m.length,
                       m.image->num_soft_tokens);
  if (m.start < prev_end || m.start < 0 || m.start + m.length > n)
    return fmt::format("image {}: span [{}, {}) is out of order or outside the prompt ({} tokens)",
                       i, m.start, m.start + m.length, n);
  for (int p = m.start; p < m.start + m.length; p++)
    if (r.prompt[size_t(p)] != v.image_token_id)
      return fmt::format("image {}: prompt position {} holds token {}, not the image token {}", i,
                         p, r.prompt[size_t(p)], v.image_token_id);
  if (auto bad = check_image(v, *m.image)) return fmt::format("image {}: {}", i, *bad);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_media(const GenerationRequest& r, const VisionSpec& v,
                                       int64_t max_step_tokens) {
  if (!v.takes_images) {
    if (r.media.empty()) return std::nullopt;
    return v.refusal.empty() ? std::string("this model does not take images") : v.refusal;
  }
  int end = 0;
  size_t placeholders = 0;
  for (size_t i = 0; i < r.media.size(); i++) {
    if (auto bad = check_span(r, v, i, end)) return bad;
    if (r.media[i].length > max_step_tokens)
      return fmt::format(
          "image {} has {} tokens, more than one step of the KV cache's sliding "
          "window blocks can compute ({}): raise the KV budget",
          i, r.media[i].length, max_step_tokens);
    end = r.media[i].start + r.media[i].length;
    placeholders += size_t(r.media[i].length);
  }
  size_t found = 0;
  for (int32_t id : r.prompt) found += id == v.image_token_id;
  if (found != placeholders)
    return fmt::format(
        "the prompt holds {} image tokens ({}) but its images cover {} (each "
        "image token must belong to an image)",
        found, v.image_token_id, placeholders);
  return std::nullopt;
}

}  // namespace tandem
