// Gemma 4 (text; transformers 5.17's Gemma4ForCausalLM, model_type "gemma4_text"), dense
// and MoE.
//
// A Gemma-style sandwich-norm decoder with these differences (modeling_gemma4.py):
//   - RMSNorms scale by w (not Gemma 2/3's 1 + w); v_norm and the router's norm have no
//     weight; q·k is unscaled (q and k are RMS-normed per head);
//   - full layers have their own head_dim (and KV heads) and a "proportional" partial
//     RoPE; sliding layers use default RoPE over the whole head;
//   - attention_k_eq_v: full layers take V from the key projection (before k_norm);
//   - per-layer inputs: a [P]-wide embedding of the token for each layer, mixed with a
//     projection of the input embedding, gates a low-rank branch after the MLP;
//   - the last num_kv_shared_layers layers read an earlier layer's KV (and may have a
//     double-wide MLP);
//   - enable_moe_block: every layer runs its dense MLP and an MoE block side by side
//     (routed from the pre-MLP residual), each with its own post-norm, summed;
//   - each layer's output is scaled by its `layer_scalar`; logits may be softcapped.
#pragma once

#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "model/arch/gemma4_config.h"
#include "model/arch/gemma_per_layer.h"
#include "model/layers.h"
#include "model/model.h"
#include "model/weight_map.h"

namespace tandem::arch {

struct Gemma4Layer {
  Gemma4LayerSpec spec;
  RmsNorm input_norm;      // [D]
  // qkv [(Hq + 2·Hkv)·Dh, D]; [(Hq + Hkv)·Dh, D] when k_eq_v; [Hq·Dh, D] on layers that
  // read another layer's KV. Norms: q, k (none on KV-reading layers), and v unweighted.
  Attention attention;
  RmsNorm post_attn_norm;  // [D]
  RmsNorm pre_ffn_norm;    // [D]
  GatedMlp mlp;            // [2F, D], [D, F]
  RmsNorm post_ffn_norm;   // [D]

  // MoE block (enable_moe_block), else undefined.
  RmsNorm post_ffn_norm_1;  // [D] after the dense MLP
  RmsNorm pre_ffn_norm_2;   // [D] before the experts
  RmsNorm post_ffn_norm_2;  // [D] after the experts
  RmsNorm router_norm;      // [D] the router's input norm, weighted by router.scale
  MoeBlock moe;             // experts_down pre-scaled by each expert's per_expert_scale

  // Per-layer input branch (hidden_size_per_layer_input P > 0), else undefined.
  PerLayerBranch per_layer;

  float layer_scalar = 1.f;

  bool has_moe() const { return moe.router.defined(); }
};

class Gemma4Model : public Model {
 public:
  Gemma4Model(ModelConfig config, const Checkpoint& checkpoint, Backend& backend);

  const Gemma4Config& gemma4_config() const { return gemma_; }
  const std::vector<Gemma4Layer>& layers() const { return layers_; }  // as loaded (tests)
  std::vector<LayerKvSpec> kv_specs() const override;
  Tensor forward(const StepTensors& step, std::span<PagedKv> kv) override;

 private:
  // Loading (gemma4.cpp).
  void load_globals(WeightLoader& w);
  void load_layer(WeightLoader& w, const Checkpoint& checkpoint, int i);
  void load_attention(WeightLoader& w, Gemma4Layer& l, int i);
  void load_moe(WeightLoader& w, const Checkpoint& checkpoint, Gemma4Layer& l, int i);
  Linear load_experts_gate_up(WeightLoader& w, const Checkpoint& checkpoint, const std::string& L,
                              int i, bool fp8);
  Linear load_experts_down(WeightLoader& w, const Checkpoint& checkpoint, const std::string& L,
                           bool fp8);
  RmsNorm load_norm(WeightLoader& w, const std::string& name, int layer);

  // The forward (gemma4_forward.cpp).
  void layer_forward(const Gemma4Layer& l, Tensor& x, const Tensor& pli, const StepTensors& step,
                     std::span<PagedKv> kv, int index);
  Tensor moe_block(const Gemma4Layer& l, const Tensor& residual);

  Gemma4Config gemma_;
  Backend& backend_;
  std::string prefix_;         // "model." or the multimodal file's (multimodal_names.h)
  int32_t pad_token_id_ = 0;   // what image placeholders embed as
  Tensor embed_;               // [V, D]
  PerLayerInputs per_layer_;   // when hidden_size_per_layer_input > 0
  LmHead head_;                // final norm, lm_head (the embedding when tied), softcap
  std::vector<Gemma4Layer> layers_;
};

}  // namespace tandem::arch
