// A conversation's images on their way into the prompt, on the HTTP thread (DESIGN §10):
//   1. refused when the model takes no images, or past --max-images-per-request (before
//      anything is read)
//   2. each image's bytes read (image_source.h), decoded, bounded and preprocessed exactly
//      as the model's image processor does (media/image_processor.h)
//   3. in the rendered prompt, the chat template's image markers (one per {"type": "image"}
//      item, in order) replaced by each image's expansion — begin, soft tokens, end — before
//      tokenizing, as transformers' processors do (Gemma's tokenizer merges the newlines
//      around an image with the text beside it)
//   4. after tokenizing, one MediaSpan per run of soft tokens, checked against the images:
//      a mismatch is tandem's bug (a 500), never a silently shifted image
// A client error is a 400 naming the message part; everything is freed on the way out.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "media/image_processor.h"
#include "server/common/image_parts.h"
#include "server/common/media_fetch_policy.h"
#include "server/common/served_images.h"
#include "server/common/special_text.h"

namespace tandem::server {

// Steps 1 and 2.
std::vector<ProcessedImage> process_request_images(const ServedImages& served,
                                                   std::span<const ImagePart> parts,
                                                   const MediaLimits& limits,
                                                   const MediaFetchPolicy& policy);

// Step 3, for a model that takes images (also with no images: then the prompt must hold
// no marker and no placeholder). A 400 (param `field`) when the prompt holds a different
// number of markers than there are images (a template that drops an image, or a marker
// typed into the text), or the placeholder's text outside an image.
// The plain spans (a message's own text, special_text.h) are left alone: a marker spelled
// there is not counted and stays text; the spans move with the expansions before them.
void expand_image_markers(RenderedPrompt& rendered, const ImageProcessor& processor,
                          std::span<const ProcessedImage> images, const char* field);
// The same for a prompt with no plain spans.
std::string expand_image_markers(const std::string& rendered, const ImageProcessor& processor,
                                 std::span<const ProcessedImage> images, const char* field);

// Step 4: one span per part of each image, in order. A 500 (internal error) unless the runs
// of `soft_id` in `tokens` are exactly the images' parts with their soft-token counts.
std::vector<MediaSpan> image_spans(std::span<const int32_t> tokens, int32_t soft_id,
                                   std::span<const ProcessedImage> images);

}  // namespace tandem::server
