// Gemma 4 text (model_type "gemma4_text") configuration, resolved per layer the way
// transformers 5.17's Gemma4TextConfig and its `per_layer_config` define it.
//
// Layers are sliding or full (`layer_types`; the last layer is always full). Full layers
// usually have their own head_dim (and, with attention_k_eq_v, their own KV head count):
// `per_layer_config` {"<layer>": {"head_dim": ..., "num_key_value_heads": ...}} overrides
// the global values for one layer; configs written without it get HF's defaults
// (`global_head_dim`, 512, and `num_global_key_value_heads`) on every full layer.
// The last `num_kv_shared_layers` layers compute no K/V: each reads the K/V of the last
// earlier (non-shared) layer of its own attention kind.
#pragma once

#include <optional>
#include <vector>

#include "model/config.h"

namespace tandem::arch {

struct Gemma4LayerSpec {
  LayerKind kind = LayerKind::Sliding;
  int num_heads = 0;          // query heads
  int num_kv_heads = 0;
  int head_dim = 0;
  int window = 0;             // 0 = full attention
  int intermediate_size = 0;  // dense MLP width (×2 on KV-shared layers with use_double_wide_mlp)
  std::optional<int> kv_source;  // layer whose K/V this layer reads (none: it computes its own)
  bool k_eq_v = false;        // values come from the key projection (no v_proj)
};

struct Gemma4Config {
  int hidden_size_per_layer_input = 0;  // 0 = no per-layer inputs
  int vocab_size_per_layer_input = 0;
  int num_kv_shared_layers = 0;
  bool use_double_wide_mlp = false;
  bool enable_moe_block = false;        // every layer then runs the MLP and an MoE block
  int num_experts = 0;
  int top_k_experts = 0;
  int moe_intermediate_size = 0;
  std::vector<Gemma4LayerSpec> layers;  // [num_layers]
};

// Applies Gemma4TextConfig's defaults that the generic parse cannot know: layer types
// (5 sliding : 1 full when absent; the last layer forced to full), the per-type RoPE when
// `rope_parameters` is absent (sliding: default θ=1e4; full: proportional, 1/4 rotated,
// θ=1e6), sliding_window 512, tied embeddings, GELU-tanh, head_dim 256.
// Throws tandem::Error for settings this text model cannot run (bidirectional attention).
void apply_gemma4_defaults(ModelConfig& c);

// The Gemma 4 fields and the per-layer resolution. Throws tandem::Error naming the field.
Gemma4Config parse_gemma4_config(const ModelConfig& c);

}  // namespace tandem::arch
