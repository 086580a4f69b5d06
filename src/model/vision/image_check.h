// Checks one image against the model's vision geometry before it reaches the engine
// thread (where a bad image would fail the whole step): shapes, patch positions, the
// soft-token count. The HTTP side's preprocessing (media/) makes images that pass.
#pragma once

#include <optional>
#include <string>

#include "media/image_input.h"
#include "model/vision/vision_spec.h"

namespace tandem {

// nullopt when `image` fits `spec`; else what is wrong, naming the field and the value.
std::optional<std::string> check_image(const VisionSpec& spec, const ImageInput& image);

}  // namespace tandem
