// The vision oracle fixtures (tests/data/oracle/vision/<name>/, from
// ../shared/oracle/vision): a tiny multimodal Gemma folder and, per case i, the processor's
// input_ids.i (image markers expanded), greedy.i, logits.i (teacher-forced over prompt +
// greedy) and each image's pixel values (pixel_values.i.j; Gemma 4: its real patches and
// image_position_ids.i.j). Until the media module's processor exists, these pixels stand
// in for it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"

namespace tandem::test {

struct VisionCase {
  std::vector<int32_t> prompt;   // the processor's input_ids
  std::vector<int32_t> greedy;   // [16] alone, eos off
  Tensor logits;                 // host f32 [prompt + 16, vocab]
  std::vector<MediaSpan> media;  // one span per image, over the image-token runs
};

std::filesystem::path vision_oracle_dir(const std::string& name);
// `image_token_id`: the model's soft-token placeholder (the runs of it are the spans).
std::vector<VisionCase> load_vision_oracle(const std::string& name, int32_t image_token_id);

// The same image with another content hash and every pixel changed by `delta`.
std::shared_ptr<const ImageInput> altered_image(const ImageInput& image, float delta);

// A request for the case's prompt and images: greedy, eos ignored, `max_tokens`.
GenerationRequest vision_request(const VisionCase& c, int max_tokens);

}  // namespace tandem::test
