// Gemma 3's vision tower (transformers' SiglipVisionModel inside Gemma3Model) and its
// multi-modal projector:
//   patches of patch_size² pixels → one GEMM (the stride-p conv, bias) + learned position
//   embeddings → layers of [LayerNorm (bias) → attention over the image's patches, both ways
//   (q/k/v/out with biases, scale 1/√Dh) → residual; LayerNorm → fc1 → GELU-tanh → fc2 →
//   residual] → post LayerNorm;
//   projector: average pool of the patch grid to mm_tokens_per_image tokens, RMSNorm with
//   (1 + w), × mm_input_projection_weight ([vision, text], stored transposed).
// The soft tokens are not scaled by √D in the text model (its embeddings are).
#pragma once

#include <memory>
#include <vector>

#include "loader/checkpoint.h"
#include "model/config.h"
#include "model/vision/vision_layers.h"
#include "model/vision/vision_tower.h"

namespace tandem {

struct SiglipConfig {
  int hidden_size = 768;
  int intermediate_size = 3072;
  int num_layers = 12;
  int num_heads = 12;
  int image_size = 224;
  int patch_size = 16;
  float layer_norm_eps = 1e-6f;
  Activation act = Activation::GeluTanh;
  int mm_tokens_per_image = 256;
  int32_t image_token_id = 262144, boi_token_id = 255999, eoi_token_id = 256000;

  int patches_per_side() const { return image_size / patch_size; }
  int tokens_per_side() const;  // √mm_tokens_per_image
};

// The vision_config and the projector's top-level fields of a Gemma 3 config.json, with
// SiglipVisionConfig's and Gemma3Config's defaults. Throws tandem::Error naming the field.
SiglipConfig parse_siglip_config(const ModelConfig& c);

class SiglipTower final : public VisionTower {
 public:
  SiglipTower(const SiglipConfig& config, const ModelConfig& text, const Checkpoint& ck,
              Backend& be);
  Tensor encode(std::span<const ImageInput* const> images) override;

 private:
  struct Layer {
    LayerNormW ln1, ln2;  // [D]
    Linear qkv;           // [3D, D] + bias
    Linear o;             // [D, D] + bias
    Linear fc1;           // [F, D] + bias
    Linear fc2;           // [D, F] + bias
  };
  Tensor embed_patches(std::span<const ImageInput* const> images);  // [B·N, D]
  void layer_forward(const Layer& l, Tensor& h, const ImageBatch& batch);
  Tensor project(const Tensor& h, int num_images);  // [B·N, D] → [B·M, D_text]

  SiglipConfig config_;
  Backend& be_;
  Linear patch_;      // [D, 3·p²] + bias: the patch conv as a GEMM over patches
  Tensor positions_;  // [N, D]
  std::vector<Layer> layers_;
  LayerNormW post_ln_;  // [D]
  RmsNorm soft_norm_;   // [D], (1 + w)
  Linear projection_;   // [D_text, D]
  Tensor ones_;         // act_mul's second operand for the MLP's GELU (vision_layers.h)
};

}  // namespace tandem
