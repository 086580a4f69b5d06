// Gemma 4's vision encoder and embedder (transformers' Gemma4VisionModel and
// Gemma4MultimodalEmbedder), over the processor's patches (padding patches excluded):
//   patch embedding: 2·(pixels − 0.5) · W_in, plus the learned x and y position rows;
//   layers of [RMSNorm → q/k/v (clipped linears where the checkpoint has bounds; q, k
//   RMS-normed with weights, v without; 2D RoPE: the first half of each head rotates with
//   the patch's x, the second with its y) → attention over the image's patches, both ways,
//   unscaled → o → RMSNorm → residual; RMSNorm → down(gelu(gate) · up) → RMSNorm →
//   residual] (RMSNorms scale by w);
//   pooler: every k×k cell of patches averaged (sum / k²) into one soft token, cells
//   numbered x/k + (max_x + 1)/k · (y/k); × √D; optionally standardized (x − b) · s;
//   embedder: unweighted RMSNorm, then the projection to the text model's width.
#pragma once

#include <vector>

#include "loader/checkpoint.h"
#include "model/config.h"
#include "model/vision/vision_layers.h"
#include "model/vision/vision_tower.h"

namespace tandem {

struct Gemma4VisionConfig {
  int hidden_size = 768;
  int intermediate_size = 3072;
  int num_layers = 16;
  int num_heads = 12;
  int num_kv_heads = 12;
  int head_dim = 64;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 100.0;
  int pooling_kernel_size = 3;
  int patch_size = 16;
  int position_embedding_size = 10240;
  bool use_clipped_linears = false;
  bool standardize = false;
  Activation act = Activation::GeluTanh;
  int32_t image_token_id = 258880, boi_token_id = 255999, eoi_token_id = 258882;
  bool bidirectional = false;  // text_config.use_bidirectional_attention == "vision"
};

// vision_config, the top-level token ids and the text model's image attention, with
// Gemma4VisionConfig's and Gemma4Config's defaults. Throws tandem::Error naming the field.
Gemma4VisionConfig parse_gemma4_vision_config(const ModelConfig& c);

class Gemma4VisionTower final : public VisionTower {
 public:
  Gemma4VisionTower(const Gemma4VisionConfig& config, const ModelConfig& text, const Checkpoint& ck,
                    Backend& be);
  Tensor encode(std::span<const ImageInput* const> images) override;

 private:
  struct Layer {
    RmsNorm input_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm;  // [D]
    ClippedLinear q, k, v;           // [H·Dh, D], [Hkv·Dh, D] ×2
    ClippedLinear o;                 // [D, H·Dh]
    RmsNorm q_norm, k_norm, v_norm;  // [Dh] (v_norm: ones)
    ClippedLinear gate, up, down;    // [F, D] ×2, [D, F]
  };
  // The per-call arrays every layer reads.
  struct Batch {
    ImageBatch images;
    StepTensors q_rope, k_rope;  // sub-head positions of q and k (2D RoPE)
  };
  Layer load_layer(WeightLoader& w, const Checkpoint& ck, int i, const Tensor& ones_head);
  Batch make_batch(std::span<const ImageInput* const> images);
  Tensor embed_patches(std::span<const ImageInput* const> images);  // [N, D]
  // "layers.{i}." + stem (e.g. "self_attn.q_proj"): its weight, and its bounds when the
  // config clips and the checkpoint has them.
  ClippedLinear load_clipped(WeightLoader& w, const Checkpoint& ck, const std::string& stem,
                             int layer, Shape expected);
  void layer_forward(const Layer& l, Tensor& h, const Batch& batch);
  Tensor attention(const Layer& l, const Tensor& x, const Batch& batch);    // [N, D]
  Tensor pool(const Tensor& h, std::span<const ImageInput* const> images);  // [M, D]

  Gemma4VisionConfig config_;
  Backend& be_;
  std::string prefix_;    // the tower's tensors
  Linear patch_;          // [D, 3·p²]
  Tensor pos_x_, pos_y_;  // [P, D] each: rows 0 and 1 of the position table
  std::vector<Layer> layers_;
  RopeSpec rope_;       // over half a head (one spatial axis)
  Tensor std_bias_;     // [1, D] (standardize)
  Tensor std_scale_;    // [D]
  RmsNorm embed_norm_;  // [D] ones
  Linear embed_proj_;   // [D_text, D]
};

}  // namespace tandem
