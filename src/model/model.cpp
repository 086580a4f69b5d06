#include "model/model.h"

#include "core/error.h"
#include "model/config.h"
#include "model/vision/image_check.h"

namespace tandem {

Model::Model(ModelConfig config)
    : owned_config_(std::make_unique<ModelConfig>(std::move(config))), config_(*owned_config_) {
  lora_.capacity = config_.lora;
}

Model::~Model() = default;

Tensor Model::encode_images(std::span<const ImageInput* const> images) {
  const VisionSpec& spec = vision_spec();
  TANDEM_CHECK(vision_ && spec.takes_images, "{}: {}", config_.model_type,
               spec.refusal.empty() ? "this model does not take images" : spec.refusal);
  for (size_t i = 0; i < images.size(); i++)
    if (auto bad = check_image(spec, *images[i])) fail("image {}: {}", i, *bad);
  return vision_->encode(images);
}

void Model::set_vision(std::unique_ptr<VisionTower> tower) {
  TANDEM_CHECK(tower && tower->spec().takes_images, "set_vision: a tower that takes no images");
  num_parameters_ += tower->num_parameters();
  vision_ = std::move(tower);
}

}  // namespace tandem
