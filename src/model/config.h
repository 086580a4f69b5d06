// ModelConfig: config.json parsed and validated once into an immutable struct.
// Both RoPE spellings are read (transformers 5's `rope_parameters`, flat or per layer
// type, and the older `rope_theta` + `rope_scaling`), and every layer gets its
// attention kind (full or sliding) from `layer_types` or the architecture's default.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "model/lora/lora_targets.h"

namespace tandem {

struct RopeConfig {
  std::string type = "default";  // default | linear | dynamic | llama3 | yarn | longrope | proportional
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  double factor = 1.0;
  std::optional<double> attention_factor;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::optional<int> original_max_position_embeddings;
  // yarn
  std::optional<double> beta_fast, beta_slow, mscale, mscale_all_dim;
  bool truncate = true;
  // longrope
  std::vector<double> short_factor, long_factor;
  // GGUF's rope_freqs tensor (Llama 3 scaling, which GGUF stores as per-pair divisors, not
  // as parameters): inv_freq[i] /= freq_divisors[i] after `type`'s own; empty: none.
  std::vector<float> freq_divisors;
};

enum class LayerKind : uint8_t { Full, Sliding };

struct ModelConfig {
  // Not from config.json: room for LoRA adapters, set by the loader's caller (load_model).
  LoraCapacity lora;
  // Not from config.json: the tensor-parallel slice a model holds (model/tp_slices.h), set
  // by load_model from LoadOptions::tp. Every field below stays the whole model's.
  TpShard tp;
  // The whole config.json, read only by the parsers of architecture-specific fields
  // (arch/*_config.cpp, vision/*): raw() is {} when unset. Shared and immutable, so the
  // header needs only json_fwd.hpp.
  std::shared_ptr<const nlohmann::json> raw_json;
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  std::vector<int> intermediate_sizes;  // per layer (Gemma 3n); else all intermediate_size
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float rms_norm_eps = 1e-6f;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  Activation activation = Activation::SiLU;
  bool attention_bias = false;
  bool mlp_bias = false;

  int sliding_window = 0;             // 0 = none
  std::vector<LayerKind> layer_kinds; // [num_layers]
  std::map<LayerKind, RopeConfig> rope;

  float attn_logit_softcap = 0.f;
  float final_logit_softcap = 0.f;
  std::optional<double> query_pre_attn_scalar;

  // Mixture of experts (0 experts = dense).
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;

  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> bos_token_id;

  // A multimodal folder (a config.json with a text_config: model/multimodal_config.h): its
  // top-level model_type ("gemma3", "gemma3n", "gemma4") and its whole config.json; every
  // field above, `raw` included, is its text model's. Empty for a text-only folder.
  std::string multimodal_type;
  std::shared_ptr<const nlohmann::json> multimodal_json;  // null: not multimodal
  // [num_layers] the layers on which an image's soft tokens see each other both ways
  // (AttentionParams::media_bidirectional), set by a multimodal builder; empty: none.
  std::vector<bool> media_bidirectional;

  const nlohmann::json& raw() const;             // {} when unset
  const nlohmann::json& multimodal_raw() const;  // null when not multimodal

  const RopeConfig& rope_for(int layer) const { return rope.at(layer_kinds[size_t(layer)]); }
  int window_for(int layer) const {
    return layer_kinds[size_t(layer)] == LayerKind::Sliding ? sliding_window : 0;
  }
  bool media_bidirectional_at(int layer) const {
    return size_t(layer) < media_bidirectional.size() && media_bidirectional[size_t(layer)];
  }

  // Parses and validates `dir/config.json` (and generation_config.json's EOS ids).
  // Throws tandem::Error naming the file and the offending field.
  static ModelConfig load(const std::filesystem::path& dir);
  static ModelConfig parse(const nlohmann::json& j, const std::string& source);
};

}  // namespace tandem
