// Per-layer inputs, as Gemma 4 and Gemma 3n share them (HF project_per_layer_inputs and
// the per_layer_input_gate branch): each token gets a [P]-wide input for every layer,
// mixed from a per-layer embedding of the token and a projection of its input embedding;
// each layer gates it with its own hidden state and adds the projected result.
#pragma once

#include "model/layers.h"

namespace tandem::arch {

struct PerLayerInputs {
  // [≥ V, L·P] per-layer embedding table; under tensor parallelism this rank's vocabulary
  // slice of it (vocab_slice_table), looked up by tp_embedding over `vocab` rows.
  Tensor embed;
  Linear projection;   // [L·P, D]
  RmsNorm norm;        // [P]
  int num_layers = 0;  // L
  int width = 0;       // P
  int64_t vocab = 0;   // the whole table's rows (vocab_size_per_layer_input)
  TpShard tp;          // the rank's slice of `embed` (size 1: the whole table)
};

// (rms_norm(x0 · Wᵀ / √D) + embed[id] · √P) / √2, per layer of P values, returned
// layer-major so that layer i's rows are contiguous.   x0 [T, D], tokens [T] → [L, T, P]
Tensor per_layer_inputs(Backend& be, const Tensor& x0, const Tensor& tokens,
                        const PerLayerInputs& p);

struct PerLayerBranch {
  Linear gate;   // [P, D] per_layer_input_gate
  Linear proj;   // [D, P] per_layer_projection
  RmsNorm norm;  // [D] post_per_layer_input_norm
  Activation act = Activation::GeluTanh;
};

// norm(proj(act(gate · x) ⊙ pli)).   x [T, D], pli [T, P] → [T, D]
Tensor per_layer_branch(Backend& be, const Tensor& x, const Tensor& pli, const PerLayerBranch& b);

}  // namespace tandem::arch
