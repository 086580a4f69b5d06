// DecoderModel: the pre-norm decoder-only transformer that Llama, Qwen2/3, Mistral,
// Phi-3, Gemma 2/3, Mixtral and Qwen3-MoE share. An architecture file supplies its
// weight map and a few traits; which optional pieces run (biases, q/k norms, Gemma's
// sandwich norms, MoE) follows from the weights the map provides.
#pragma once

#include "backend/backend.h"
#include "loader/checkpoint.h"
#include "model/layers.h"
#include "model/model.h"
#include "model/tp_slices.h"
#include "model/weight_map.h"

namespace tandem {

struct DecoderTraits {
  float norm_weight_offset = 0.f;  // Gemma's RMSNorm scales by (1 + w)
  bool scale_embeddings = false;   // Gemma multiplies embeddings by sqrt(hidden_size)
  bool moe_renormalize = true;     // renormalize the top-k routing weights
  // MiniCPM's μP scalings (1 = off): embeddings × embedding_multiplier, each block's
  // output × residual_multiplier before it joins the residual, final hidden state ÷
  // logit_divisor before the LM head.
  float embedding_multiplier = 1.f;
  float residual_multiplier = 1.f;
  float logit_divisor = 1.f;
};

struct DecoderLayer {
  RmsNorm attn_norm;       // [D]
  Attention attention;     // qkv (+ bias: Qwen2), q/k norms (Qwen3, Gemma 3), o (+ bias)
  RmsNorm post_attn_norm;  // [D], Gemma 2/3 only (else undefined)
  RmsNorm ffn_norm;        // [D]
  GatedMlp mlp;            // dense layers (biases: Phi-3 style maps may add them)
  MoeBlock moe;            // sparse layers of Mixtral / Qwen3-MoE (moe.router defined)
  RmsNorm post_ffn_norm;   // [D], Gemma 2/3 only (else undefined)

  bool sparse() const { return moe.router.defined(); }
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelConfig config, DecoderTraits traits, WeightMap map,
               const Checkpoint& checkpoint, Backend& backend);

  std::vector<LayerKvSpec> kv_specs() const override;
  Tensor forward(const StepTensors& step, std::span<PagedKv> kv) override;

 protected:
  void load_layer(WeightLoader& w, int i);
  RmsNorm load_norm(WeightLoader& w, const std::string& name, int layer, bool must_exist = true);
  // hq: h's e4m3 copy for the block's FP8 input projection, where the norm made one.
  Tensor attention_block(const DecoderLayer& layer, const Tensor& h, const Fp8Input& hq,
                         const StepTensors& step, PagedKv& kv);
  Tensor mlp_block(const DecoderLayer& layer, const Tensor& h, const Fp8Input& hq,
                   const StepTensors& step);
  // The step's token embeddings [T, D] (a vocabulary-split lookup under tensor parallelism).
  Tensor embed(const StepTensors& step, float scale);

  DecoderTraits traits_;
  Backend& backend_;
  Tensor embed_;  // [V, D]; under tensor parallelism [V/N, D] (vocab_slice_embedding)
  LmHead head_;   // final norm [D], lm_head [V, D] (the embedding when tied)
  std::vector<DecoderLayer> layers_;
};

// The weight map shared by Llama-style checkpoints (q/k/v/o, gate/up/down, the two
// norms, optional biases and q/k norms). Architectures add or replace rules.
WeightMap llama_style_weight_map();

}  // namespace tandem
