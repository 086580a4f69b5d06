// Gemma 3n's own configuration (transformers' Gemma3nTextConfig): the fields the shared
// ModelConfig does not know, read from config.json (ModelConfig::raw) with HF's defaults,
// plus the fix-ups of the shared fields whose Gemma 3n defaults differ from the generic
// ones (layer pattern, window, RoPE θ per layer type, logit softcap, tied embeddings).
#pragma once

#include <optional>
#include <vector>

#include "model/config.h"

namespace tandem::arch {

struct Gemma3nConfig {
  int altup_num_inputs = 4;               // N: streams the residual is carried in
  int altup_active_idx = 0;               // the stream the layer computes on
  bool altup_correct_scale = true;        // scale the corrected active stream per channel
  int laurel_rank = 64;                   // LAuReL's low-rank width
  int hidden_size_per_layer_input = 256;  // P
  int vocab_size_per_layer_input = 262144;
  int num_kv_shared_layers = 15;
  bool tie_word_embeddings = true;
  std::vector<float> activation_sparsity;  // [num_layers], 0 = dense
  std::vector<std::optional<int>> kv_source;  // [num_layers]: producer layer (none: its own)

  // Parses config.raw and fixes config's shared fields to Gemma 3n's defaults where
  // config.json left them out. Throws tandem::Error naming the field.
  static Gemma3nConfig parse(ModelConfig& config);
};

// Φ⁻¹(p) of the standard normal (HF: Normal(0, 1).icdf), for 0 < p < 1.
double normal_icdf(double p);

}  // namespace tandem::arch
