// VisionTower: a multimodal model's image encoder and projector (Gemma 3's SigLIP tower,
// Gemma 4's encoder), from the processor's pixels to soft tokens in the text model's
// embedding space. The text model writes them over the image's placeholder embeddings
// (StepTensors::media).
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "media/image_input.h"
#include "model/vision/vision_spec.h"

namespace tandem {

class VisionTower {
 public:
  virtual ~VisionTower() = default;
  const VisionSpec& spec() const { return spec_; }
  int64_t num_parameters() const { return num_parameters_; }
  // Encodes the images together (one batch): [Σ num_soft_tokens, D] in the backend's act
  // dtype, image i's rows after image i-1's. The images passed check_image(spec(), ·).
  virtual Tensor encode(std::span<const ImageInput* const> images) = 0;

 protected:
  VisionSpec spec_;
  int64_t num_parameters_ = 0;
};

}  // namespace tandem
