// The checks a request's images pass before the engine takes it (Engine::submit): the
// model takes images, the spans are in order and inside the prompt, each covers exactly
// the image's soft-token placeholders, no placeholder lies outside a span (also in a prompt
// without images, on a model that takes them), and each image
// fits the model's vision geometry (model/vision/image_check.h). A request that fails is
// refused with the reason; nothing reaches the engine thread that could fail a step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/request.h"
#include "model/vision/vision_spec.h"

namespace tandem {

// nullopt when `request`'s media are good for a model with `vision` whose KV cache computes
// at most `max_step_tokens` tokens of one sequence in a step (KvBlockManager::
// max_step_tokens: an image is computed in one step); else why not.
std::optional<std::string> check_media(const GenerationRequest& request, const VisionSpec& vision,
                                       int64_t max_step_tokens = INT64_MAX);

}  // namespace tandem
