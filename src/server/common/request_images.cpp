#include "server/common/request_images.h"

#include <algorithm>

#include "media/media_error.h"
#include "server/common/api_error.h"
#include "server/common/image_source.h"

namespace tandem::server {
namespace {

ProcessedImage process_one(const ImageProcessor& processor, const ImagePart& part,
                           const MediaLimits& limits, const MediaFetchPolicy& policy) {
  std::vector<uint8_t> bytes = read_image_bytes(part, policy, limits);
  try {
    return processor.process(bytes, limits);
  } catch (const MediaError& e) {
    image_part_error(part.path, e.what());
  }
}

struct SoftRun {
  size_t start = 0;
  size_t length = 0;
};

std::vector<SoftRun> soft_runs(std::span<const int32_t> tokens, int32_t soft_id) {
  std::vector<SoftRun> runs;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] != soft_id) continue;
    if (!runs.empty() && runs.back().start + runs.back().length == i)
      ++runs.back().length;
    else
      runs.push_back({i, 1});
  }
  return runs;
}

}  // namespace

std::vector<ProcessedImage> process_request_images(const ServedImages& served,
                                                   std::span<const ImagePart> parts,
                                                   const MediaLimits& limits,
                                                   const MediaFetchPolicy& policy) {
  if (parts.empty()) return {};
  if (!served.takes_images)
    image_part_error(parts[0].path,
                     fmt::format("this model does not take images ({})", served.refusal));
  if (parts.size() > size_t(limits.max_images_per_request))
    image_part_error(parts[size_t(limits.max_images_per_request)].path,
                     fmt::format("the request has {} images, over the limit of {} "
                                 "(--max-images-per-request)",
                                 parts.size(), limits.max_images_per_request));
  std::vector<ProcessedImage> images;
  images.reserve(parts.size());
  for (const ImagePart& part : parts)
    images.push_back(process_one(*served.processor, part, limits, policy));
  return images;
}

namespace {

bool inside(const std::vector<RenderedPrompt::Span>& spans, size_t at) {
  for (const RenderedPrompt::Span& s : spans)
    if (at >= s.begin && at < s.end) return true;
  return false;
}

// Where `needle` occurs in `text` outside the plain spans (what the template wrote).
std::vector<size_t> template_occurrences(const RenderedPrompt& r, std::string_view needle) {
  std::vector<size_t> out;
  if (needle.empty()) return out;
  for (size_t at = r.text.find(needle); at != std::string::npos;
       at = r.text.find(needle, at + needle.size()))
    if (!inside(r.plain, at)) out.push_back(at);
  return out;
}

}  // namespace

void expand_image_markers(RenderedPrompt& rendered, const ImageProcessor& processor,
                          std::span<const ProcessedImage> images, const char* field) {
  const ImagePromptSpec& spec = processor.prompt_spec();
  const std::vector<size_t> markers = template_occurrences(rendered, spec.marker);
  if (markers.size() != images.size())
    invalid_request(field,
                    "The rendered prompt holds {} image markers ('{}') for {} images: the chat "
                    "template dropped an image, or a message's text holds the marker itself",
                    markers.size(), spec.marker, images.size());
  if (spec.soft != spec.marker && !template_occurrences(rendered, spec.soft).empty())
    invalid_request(field,
                    "A message's text holds the image placeholder '{}', which only images may "
                    "produce",
                    spec.soft);
  std::string out;
  out.reserve(rendered.text.size());
  size_t from = 0;
  // shift[i]: how far the text after marker i moved (the plain spans move with it).
  std::vector<int64_t> shift(markers.size());
  int64_t moved = 0;
  for (size_t i = 0; i < markers.size(); ++i) {
    out.append(rendered.text, from, markers[i] - from);
    const std::string expansion = processor.prompt_text(images[i]);
    out += expansion;
    moved += int64_t(expansion.size()) - int64_t(spec.marker.size());
    shift[i] = moved;
    from = markers[i] + spec.marker.size();
  }
  out.append(rendered.text, from, std::string::npos);
  for (RenderedPrompt::Span& span : rendered.plain) {
    // A span lies between markers: it moves by the expansions before it.
    size_t before = size_t(std::lower_bound(markers.begin(), markers.end(), span.begin) -
                           markers.begin());
    const int64_t d = before ? shift[before - 1] : 0;
    span.begin = size_t(int64_t(span.begin) + d);
    span.end = size_t(int64_t(span.end) + d);
  }
  rendered.text = std::move(out);
}

std::string expand_image_markers(const std::string& rendered, const ImageProcessor& processor,
                                 std::span<const ProcessedImage> images, const char* field) {
  RenderedPrompt r{rendered, {}};
  expand_image_markers(r, processor, images, field);
  return std::move(r.text);
}

std::vector<MediaSpan> image_spans(std::span<const int32_t> tokens, int32_t soft_id,
                                   std::span<const ProcessedImage> images) {
  std::vector<SoftRun> runs = soft_runs(tokens, soft_id);
  std::vector<MediaSpan> spans;
  size_t r = 0;
  for (const ProcessedImage& image : images) {
    for (const auto& part : image.parts) {
      if (r >= runs.size() || runs[r].length != size_t(part->num_soft_tokens))
        throw internal_error(fmt::format(
            "image prompt expansion: image run {} of the tokenized prompt has {} placeholder "
            "tokens (id {}); the image needs {}",
            r, r < runs.size() ? runs[r].length : 0, soft_id, part->num_soft_tokens));
      spans.push_back({int32_t(runs[r].start), int32_t(runs[r].length), part});
      ++r;
    }
  }
  if (r != runs.size())
    throw internal_error(fmt::format(
        "image prompt expansion: the tokenized prompt has {} placeholder runs for {} image parts",
        runs.size(), r));
  return spans;
}

}  // namespace tandem::server
