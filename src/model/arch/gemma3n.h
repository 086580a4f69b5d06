// Gemma 3n (text, transformers' Gemma3nForCausalLM / model_type "gemma3n_text").
//
// The residual is carried in N = altup_num_inputs streams [N, T, D] (AltUp). Each layer
// predicts all streams from a per-token N×N mix, computes on the active one (attention,
// MLP, and LAuReL, a low-rank branch beside attention), then corrects every stream with
// the innovation (computed − predicted active stream) and adds a per-layer input, a
// [P]-wide embedding of the token for that layer, gated by the corrected active stream,
// to the other streams. Early layers sparsify the MLP's gate (keep what lies above
// mean + σ·Φ⁻¹(sparsity) per token). The last num_kv_shared_layers layers own no KV:
// they attend over the KV of the last earlier layer of their attention kind.
// RMSNorms scale by w (not Gemma 2/3's 1 + w); attention is unscaled (q/k are normed).
#pragma once

#include <vector>

#include "loader/checkpoint.h"
#include "model/arch/gemma3n_config.h"
#include "model/model.h"
#include "model/weight_map.h"

namespace tandem::arch {

struct Gemma3nLayer {
  Tensor input_norm;              // [D]
  Tensor qkv, qkv_bias;           // [(Hq + 2·Hkv)·Dh, D] and [(Hq + 2·Hkv)·Dh] or undefined;
                                  // q only ([Hq·Dh, D]) on layers that read another layer's KV
  Tensor q_norm, k_norm;          // [Dh]
  Tensor o, o_bias;               // [D, Hq·Dh], [D] or undefined
  Tensor post_attn_norm;          // [D]
  Tensor pre_ffn_norm;            // [D]
  Tensor gate_up, down;           // [2F, D], [D, F]
  Tensor post_ffn_norm;           // [D]
  bool sparse_gate = false;       // activation sparsity on this layer's MLP
  float gate_std_multiplier = 0;  // Φ⁻¹(sparsity), when sparse_gate

  Tensor router_norm;    // [D]      AltUp: router input norm
  Tensor router;         // [N, D]   modality router
  Tensor predict_coefs;  // [N·N, N]
  Tensor correct_coefs;  // [N, N]
  Tensor output_scale;   // [D]      correct_output_scale

  Tensor laurel_left;   // [R, D]
  Tensor laurel_right;  // [D, R]
  Tensor laurel_norm;   // [D]

  Tensor pli_gate;  // [P, D]   per_layer_input_gate
  Tensor pli_proj;  // [D, P]   per_layer_projection
  Tensor pli_norm;  // [D]      post_per_layer_input_norm

  int kv_source = -1;  // layer whose KV this layer reads, or -1 (its own)
  RopeSpec rope;
  AttentionParams attention;
};

class Gemma3nModel : public Model {
 public:
  Gemma3nModel(ModelConfig config, const Checkpoint& checkpoint, Backend& backend);

  const Gemma3nConfig& gemma3n_config() const { return g_; }
  std::vector<LayerKvSpec> kv_specs() const override;
  Tensor forward(const StepTensors& step, std::span<PagedKv> kv) override;

 private:
  // Loading (gemma3n.cpp).
  void load_globals(WeightLoader& w, const Checkpoint& checkpoint);
  void load_layer(WeightLoader& w, int i);

  // The model around the layers (gemma3n_forward.cpp).
  Tensor per_layer_inputs(const Tensor& x0, const StepTensors& step);  // [L, T, P]
  Tensor init_streams(const Tensor& x0);                               // [N, T, D]
  Tensor logits(const Tensor& streams, const StepTensors& step);       // [S, V]

  // One decoder layer (gemma3n_layer.cpp). streams [N, T, D] in place, pli [T, P].
  void layer_forward(const Gemma3nLayer& l, Tensor& streams, const Tensor& pli,
                     const StepTensors& step, std::span<PagedKv> kv, int index);
  Tensor router_modalities(const Gemma3nLayer& l, const Tensor& x);  // [T, N]
  Tensor altup_predict(const Gemma3nLayer& l, const Tensor& streams);
  void altup_correct(const Gemma3nLayer& l, Tensor& predictions, const Tensor& activated);
  Tensor laurel(const Gemma3nLayer& l, const Tensor& x);
  Tensor attention_block(const Gemma3nLayer& l, const Tensor& x, const StepTensors& step,
                         std::span<PagedKv> kv, int index);
  Tensor mlp_block(const Gemma3nLayer& l, const Tensor& x);
  void add_per_layer_input(const Gemma3nLayer& l, Tensor& corrected, const Tensor& pli);

  Tensor stream(const Tensor& streams, int n) const;  // [T, D] view of stream n
  Tensor norm(const Tensor& x, const Tensor& w);      // new tensor: rms_norm(x) · w
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});

  Gemma3nConfig g_;
  Backend& backend_;
  Tensor embed_;                   // [V, D]
  Tensor embed_per_layer_;         // [max(V, Vp), L·P]: ids ≥ Vp read row 0 (HF's mask)
  Tensor per_layer_projection_;    // [L·P, D]
  Tensor per_layer_norm_;          // [P]
  std::vector<Tensor> altup_in_;   // N − 1 × [D, D]
  std::vector<Tensor> altup_out_;  // N − 1 × [D, D]
  Tensor final_norm_;              // [D]
  Tensor lm_head_;                 // [V, D] (the embedding when tied)
  Tensor ones_head_;               // [Dh]: the unscaled v_norm
  Tensor ones_streams_;            // [N]: the +1 of AltUp's correction coefficients
  std::vector<Gemma3nLayer> layers_;
};

}  // namespace tandem::arch
