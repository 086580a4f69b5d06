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
#include "model/model.h"
#include "model/weight_map.h"

namespace tandem::arch {

struct Gemma4Layer {
  Gemma4LayerSpec spec;
  Tensor input_norm;        // [D]
  Tensor qkv;               // [(Hq + 2·Hkv)·Dh, D]; [(Hq + Hkv)·Dh, D] when k_eq_v;
                            // [Hq·Dh, D] on layers that read another layer's KV
  Tensor q_norm, k_norm;    // [Dh] (k_norm undefined on KV-reading layers)
  Tensor unit_norm;         // [Dh] ones: v_norm has no weight
  Tensor o;                 // [D, Hq·Dh]
  Tensor post_attn_norm;    // [D]
  Tensor pre_ffn_norm;      // [D]
  Tensor gate_up, down;     // [2F, D], [D, F]
  Tensor post_ffn_norm;     // [D]

  // MoE block (enable_moe_block), else undefined.
  Tensor post_ffn_norm_1;   // [D] after the dense MLP
  Tensor pre_ffn_norm_2;    // [D] before the experts
  Tensor post_ffn_norm_2;   // [D] after the experts
  Tensor router_scale;      // [D]
  Tensor router;            // [E, D]
  Tensor experts_gate_up;   // [E, 2Fe, D]
  Tensor experts_down;      // [E, D, Fe], each expert pre-scaled by its per_expert_scale

  // Per-layer input branch (hidden_size_per_layer_input P > 0), else undefined.
  Tensor pli_gate;          // [P, D]
  Tensor pli_proj;          // [D, P]
  Tensor pli_norm;          // [D]

  float layer_scalar = 1.f;
  RopeSpec rope;
  AttentionParams attention;
};

class Gemma4Model : public Model {
 public:
  Gemma4Model(ModelConfig config, const Checkpoint& checkpoint, Backend& backend);

  const Gemma4Config& gemma4_config() const { return g_; }
  std::vector<LayerKvSpec> kv_specs() const override;
  Tensor forward(const StepTensors& step, std::span<PagedKv> kv) override;

 private:
  // Loading (gemma4.cpp).
  void load_globals(WeightLoader& w, const Checkpoint& checkpoint);
  void load_layer(WeightLoader& w, const Checkpoint& checkpoint, int i);
  void load_moe(WeightLoader& w, const Checkpoint& checkpoint, Gemma4Layer& l, int i);
  Tensor ones(int64_t n);

  // The forward (gemma4_forward.cpp).
  Tensor per_layer_inputs(const Tensor& x0, const StepTensors& step);  // [L, T, P]
  void layer_forward(const Gemma4Layer& l, Tensor& x, const Tensor& pli, const StepTensors& step,
                     std::span<PagedKv> kv, int index);
  Tensor attention_block(const Gemma4Layer& l, const Tensor& h, const StepTensors& step,
                         std::span<PagedKv> kv, int index);
  Tensor mlp_block(const Gemma4Layer& l, const Tensor& h);
  Tensor moe_block(const Gemma4Layer& l, const Tensor& residual);
  Tensor logits(const Tensor& x, const StepTensors& step);
  Tensor norm(const Tensor& x, const Tensor& w);  // new tensor: rms_norm(x) · w
  Tensor linear(const Tensor& x, const Tensor& w);

  Gemma4Config g_;
  Backend& backend_;
  std::string prefix_;              // "model." or "model.language_model." (multimodal files)
  Tensor embed_;                    // [V, D]
  Tensor embed_per_layer_;          // [Vp, L·P]
  Tensor per_layer_projection_;     // [L·P, D]
  Tensor per_layer_norm_;           // [P]
  Tensor final_norm_;               // [D]
  Tensor lm_head_;                  // [V, D] (the embedding when tied)
  std::vector<Gemma4Layer> layers_;
};

}  // namespace tandem::arch
