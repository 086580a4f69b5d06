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
#include "model/arch/gemma_per_layer.h"
#include "model/layers.h"
#include "model/model.h"
#include "model/weight_map.h"

namespace tandem::arch {

struct Gemma3nLayer {
  RmsNorm input_norm;             // [D]
  // qkv [(Hq + 2·Hkv)·Dh, D] with its bias (or none); q only ([Hq·Dh, D]) on layers that
  // read another layer's KV. Norms: q and k weighted, v unweighted.
  Attention attention;
  RmsNorm post_attn_norm;         // [D]
  RmsNorm pre_ffn_norm;           // [D]
  GatedMlp mlp;                   // [2F, D], [D, F]
  RmsNorm post_ffn_norm;          // [D]
  bool sparse_gate = false;       // activation sparsity on this layer's MLP
  float gate_std_multiplier = 0;  // Φ⁻¹(sparsity), when sparse_gate

  RmsNorm router_norm;    // [D]      AltUp: router input norm
  Linear router;          // [N, D]   modality router
  Linear predict_coefs;   // [N·N, N]
  Linear correct_coefs;   // [N, N], bias: ones (the +1 of the correction coefficients)
  Tensor output_scale;    // [D]      correct_output_scale

  Linear laurel_left;     // [R, D]
  Linear laurel_right;    // [D, R]
  RmsNorm laurel_norm;    // [D]

  PerLayerBranch per_layer;

  std::optional<int> kv_source;  // layer whose KV this layer reads (none: its own)
};

class Gemma3nModel : public Model {
 public:
  Gemma3nModel(ModelConfig config, const Checkpoint& checkpoint, Backend& backend);

  const Gemma3nConfig& gemma3n_config() const { return gemma_; }
  std::vector<LayerKvSpec> kv_specs() const override;
  Tensor forward(const StepTensors& step, std::span<PagedKv> kv) override;

 private:
  // Loading (gemma3n.cpp).
  void load_globals(WeightLoader& w, const Checkpoint& checkpoint);
  void load_layer(WeightLoader& w, int i);
  void load_attention(WeightLoader& w, Gemma3nLayer& l, int i);
  RmsNorm load_norm(WeightLoader& w, const std::string& name, int layer, int64_t width);

  // The model around the layers (gemma3n_forward.cpp).
  Tensor init_streams(const Tensor& x0);                          // [N, T, D]
  // The final hidden state of tokens `index`: their streams folded back into one.
  Tensor folded(const Tensor& streams, const Tensor& index);      // [I, D]
  Tensor logits(const Tensor& streams, const StepTensors& step);  // [S, V] f32

  // One decoder layer (gemma3n_layer.cpp). streams [N, T, D] in place, pli [T, P].
  void layer_forward(const Gemma3nLayer& l, Tensor& streams, const Tensor& pli,
                     const StepTensors& step, std::span<PagedKv> kv, int index);
  Tensor router_modalities(const Gemma3nLayer& l, const Tensor& x);  // [T, N]
  Tensor altup_predict(const Gemma3nLayer& l, const Tensor& streams);
  void altup_correct(const Gemma3nLayer& l, Tensor& predictions, const Tensor& activated);
  Tensor laurel(const Gemma3nLayer& l, const Tensor& x);
  Tensor mlp_block(const Gemma3nLayer& l, const Tensor& x, const StepTensors& step);
  void sparsify_gate(Tensor& gate, float std_multiplier);
  void add_per_layer_input(const Gemma3nLayer& l, Tensor& corrected, const Tensor& pli);

  Tensor stream(const Tensor& streams, int n) const;  // [T, D] view of stream n

  Gemma3nConfig gemma_;
  Backend& backend_;
  Tensor embed_;                   // [V, D]; under tensor parallelism [V/N + 1, D]
  PerLayerInputs per_layer_;       // embed [max(V, Vp), L·P]: ids ≥ Vp read row 0 (HF's mask);
                                   // under tensor parallelism its 1/N vocabulary slice
  std::vector<Linear> altup_in_;   // N − 1 × [D, D]
  std::vector<Linear> altup_out_;  // N − 1 × [D, D]
  LmHead head_;                    // final norm, lm_head (the embedding when tied), softcap
  Tensor ones_head_;               // [Dh]: the unscaled v_norm
  std::vector<Gemma3nLayer> layers_;
};

}  // namespace tandem::arch
