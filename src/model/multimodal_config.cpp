#include "model/multimodal_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem {

namespace {

using json = nlohmann::json;

// HF's text config defaults that a sparse published text_config relies on.
json gemma3_text_defaults() {
  return {{"vocab_size", 262208},
          {"hidden_size", 2304},
          {"intermediate_size", 9216},
          {"num_hidden_layers", 26},
          {"num_attention_heads", 8},
          {"num_key_value_heads", 4},
          {"head_dim", 256},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-6},
          {"pad_token_id", 0},
          {"eos_token_id", 1},
          {"bos_token_id", 2},
          {"tie_word_embeddings", true},
          {"rope_theta", 1000000.0},
          {"attention_bias", false},
          {"query_pre_attn_scalar", 256},
          {"sliding_window", 4096},
          {"rope_local_base_freq", 10000.0},
          {"sliding_window_pattern", 6}};
}

// Gemma4TextConfig's sizes (the rest: apply_gemma4_defaults).
json gemma4_text_defaults() {
  return {{"vocab_size", 262144},    {"hidden_size", 2304},      {"intermediate_size", 9216},
          {"num_hidden_layers", 30}, {"num_attention_heads", 8}, {"pad_token_id", 0},
          {"eos_token_id", 1},       {"bos_token_id", 2}};
}

// Gemma3TextConfig: every sliding_window_pattern-th layer is full, the others slide.
void derive_gemma3_layer_types(json& c) {
  if (c.contains("layer_types") && !c["layer_types"].is_null()) return;
  const json& n = c["num_hidden_layers"];
  const json& pattern = c["sliding_window_pattern"];
  if (!n.is_number_integer() || !pattern.is_number_integer() || pattern.get<int>() <= 0) return;
  json types = json::array();
  for (int i = 0; i < n.get<int>(); i++)
    types.push_back((i + 1) % pattern.get<int>() ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
}

}  // namespace

bool is_multimodal_config(const json& j) {
  auto it = j.find("text_config");
  return j.is_object() && it != j.end() && it->is_object();
}

json text_model_config(const json& j, const std::string& src) {
  const std::string type = j.value("model_type", std::string());
  json out;
  if (type == "gemma3")
    out = gemma3_text_defaults();
  else if (type == "gemma4")
    out = gemma4_text_defaults();
  else if (type == "gemma3n")
    out = json::object();
  else
    fail(
        "{}: model_type '{}' has a text_config; tandem reads the text_config of gemma3, "
        "gemma3n and gemma4 folders only",
        src, type);
  const json& text = j.at("text_config");
  for (const char* key : {"torch_dtype", "dtype", "quantization_config", "eos_token_id",
                          "bos_token_id", "pad_token_id", "tie_word_embeddings"})
    if (j.contains(key) && !j.at(key).is_null() && !text.contains(key)) out[key] = j.at(key);
  for (auto& [key, value] : text.items()) out[key] = value;
  out["model_type"] = type + "_text";
  if (type == "gemma3") derive_gemma3_layer_types(out);
  return out;
}

}  // namespace tandem
