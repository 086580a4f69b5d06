#include "model/arch/gemma4_config.h"

#include <nlohmann/json.hpp>
#include <map>
#include <string>

#include "core/error.h"

namespace tandem::arch {
namespace {

using json = nlohmann::json;
constexpr const char* kSrc = "config.json (gemma4_text)";

bool absent(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null();
}

// An optional field of type T; `fallback` when absent or null.
template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  if (absent(j, key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail("{}: field '{}' has the wrong type ({})", kSrc, key, j.at(key).dump());
  }
}

// The per-layer overrides tandem understands; any other attribute must equal its global
// value (HF drops overrides equal to the global value when it saves a config).
using Overrides = std::map<int, std::map<std::string, int>>;
const char* const kPerLayerKeys[] = {"head_dim", "num_key_value_heads", "num_attention_heads",
                                     "intermediate_size"};

void add_override(Overrides& out, int layer, const std::string& key, const json& value,
                  const json& raw) {
  for (const char* k : kPerLayerKeys)
    if (key == k) {
      if (!value.is_number_integer() || value.get<int>() <= 0)
        fail("{}: per_layer_config[{}].{} must be a positive integer (got {})", kSrc, layer, key,
             value.dump());
      out[layer][key] = value.get<int>();
      return;
    }
  if (key == "skip" && value.is_array() && value.empty()) return;
  if (raw.contains(key) && raw.at(key) == value) return;
  fail("{}: per_layer_config[{}] overrides '{}' (= {}), which tandem does not support per layer",
       kSrc, layer, key, value.dump());
}

// `per_layer_config` as written, or HF's default: every full layer gets global_head_dim
// (default 512) and, with attention_k_eq_v, num_global_key_value_heads.
Overrides per_layer_overrides(const ModelConfig& c) {
  const json& raw = c.raw();
  Overrides out;
  if (!absent(raw, "per_layer_config")) {
    const json& plc = raw.at("per_layer_config");
    if (!plc.is_object()) fail("{}: per_layer_config must be an object (got {})", kSrc, plc.dump());
    for (auto& [key, overrides] : plc.items()) {
      int layer = -1;
      try {
        size_t used = 0;
        layer = std::stoi(key, &used);
        if (used != key.size()) layer = -1;
      } catch (const std::exception&) {
      }
      if (layer < 0 || layer >= c.num_layers)
        fail("{}: per_layer_config key '{}' is not a layer index in [0, {})", kSrc, key,
             c.num_layers);
      if (!overrides.is_object())
        fail("{}: per_layer_config['{}'] must be an object (got {})", kSrc, key, overrides.dump());
      for (auto& [attr, value] : overrides.items()) add_override(out, layer, attr, value, raw);
    }
    return out;
  }
  int global_head_dim = get_or<int>(raw, "global_head_dim", 512);
  bool k_eq_v = get_or<bool>(raw, "attention_k_eq_v", false);
  int global_kv = get_or<int>(raw, "num_global_key_value_heads", 0);
  for (int i = 0; i < c.num_layers; i++) {
    if (c.layer_kinds[size_t(i)] != LayerKind::Full) continue;
    out[i]["head_dim"] = global_head_dim;
    if (k_eq_v && global_kv > 0) out[i]["num_key_value_heads"] = global_kv;
  }
  return out;
}

int override_or(const Overrides& o, int layer, const char* key, int fallback) {
  auto l = o.find(layer);
  if (l == o.end()) return fallback;
  auto v = l->second.find(key);
  return v == l->second.end() ? fallback : v->second;
}

// The last non-shared layer before `first_shared` of the same kind (HF's
// `store_full_length_kv` layer for that kind).
int kv_source_for(const ModelConfig& c, int layer, int first_shared) {
  for (int j = first_shared - 1; j >= 0; j--)
    if (c.layer_kinds[size_t(j)] == c.layer_kinds[size_t(layer)]) return j;
  fail("{}: layer {} shares KV (num_kv_shared_layers) but no earlier layer of its attention "
       "type computes any",
       kSrc, layer);
}

void validate_layer(const Gemma4LayerSpec& s, int i) {
  if (s.head_dim <= 0 || s.head_dim % 2 != 0)
    fail("{}: layer {} head_dim must be even and > 0 (got {})", kSrc, i, s.head_dim);
  if (s.num_heads <= 0 || s.num_kv_heads <= 0 || s.num_heads % s.num_kv_heads != 0)
    fail("{}: layer {}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
         kSrc, i, s.num_heads, s.num_kv_heads);
  if (s.intermediate_size <= 0)
    fail("{}: layer {} intermediate_size must be > 0 (got {})", kSrc, i, s.intermediate_size);
}

void parse_moe(Gemma4Config& g, const json& raw) {
  g.enable_moe_block = get_or<bool>(raw, "enable_moe_block", false);
  if (!g.enable_moe_block) return;
  g.num_experts = get_or<int>(raw, "num_experts", 0);
  g.top_k_experts = get_or<int>(raw, "top_k_experts", 0);
  g.moe_intermediate_size = get_or<int>(raw, "moe_intermediate_size", 0);
  if (g.num_experts <= 0 || g.top_k_experts <= 0 || g.top_k_experts > g.num_experts ||
      g.moe_intermediate_size <= 0)
    fail("{}: enable_moe_block needs num_experts > 0, top_k_experts in [1, num_experts] and "
         "moe_intermediate_size > 0 (got {}, {}, {})",
         kSrc, g.num_experts, g.top_k_experts, g.moe_intermediate_size);
}

}  // namespace

void apply_gemma4_defaults(ModelConfig& c) {
  const json& raw = c.raw();
  if (get_or<std::string>(raw, "use_bidirectional_attention", "") == "all")
    fail("{}: use_bidirectional_attention 'all' (non-causal) cannot generate text", kSrc);
  if (absent(raw, "head_dim")) c.head_dim = 256;
  if (absent(raw, "num_key_value_heads")) c.num_kv_heads = 4;
  if (absent(raw, "max_position_embeddings")) c.max_position_embeddings = 131072;
  if (absent(raw, "sliding_window")) c.sliding_window = 512;
  if (absent(raw, "tie_word_embeddings")) c.tie_word_embeddings = true;
  if (absent(raw, "hidden_activation") && absent(raw, "hidden_act"))
    c.activation = Activation::GeluTanh;
  if (absent(raw, "layer_types")) {
    c.layer_kinds.clear();
    for (int i = 0; i < c.num_layers; i++)
      c.layer_kinds.push_back((i + 1) % 6 ? LayerKind::Sliding : LayerKind::Full);
  }
  if (!c.layer_kinds.empty()) c.layer_kinds.back() = LayerKind::Full;  // as HF forces it
  if (absent(raw, "rope_parameters")) {
    RopeConfig sliding;
    sliding.theta = 10000.0;
    RopeConfig full;
    full.type = "proportional";
    full.partial_rotary_factor = 0.25;
    full.theta = 1000000.0;
    c.rope[LayerKind::Sliding] = sliding;
    c.rope[LayerKind::Full] = full;
  }
  for (auto kind : c.layer_kinds)
    if (kind == LayerKind::Sliding && c.sliding_window <= 0)
      fail("{}: sliding layers need sliding_window > 0 (got {})", kSrc, c.sliding_window);
}

Gemma4Config parse_gemma4_config(const ModelConfig& c) {
  const json& raw = c.raw();
  Gemma4Config g;
  g.hidden_size_per_layer_input = raw.contains("hidden_size_per_layer_input")
                                      ? get_or<int>(raw, "hidden_size_per_layer_input", 0)
                                      : 256;
  g.vocab_size_per_layer_input = get_or<int>(raw, "vocab_size_per_layer_input", 262144);
  if (g.hidden_size_per_layer_input < 0 ||
      (g.hidden_size_per_layer_input > 0 && g.vocab_size_per_layer_input <= 0))
    fail("{}: per-layer inputs need hidden_size_per_layer_input >= 0 (got {}) and "
         "vocab_size_per_layer_input > 0 (got {})",
         kSrc, g.hidden_size_per_layer_input, g.vocab_size_per_layer_input);
  g.num_kv_shared_layers = get_or<int>(raw, "num_kv_shared_layers", 0);
  if (g.num_kv_shared_layers < 0 || g.num_kv_shared_layers >= c.num_layers)
    fail("{}: num_kv_shared_layers must be in [0, {}) (got {})", kSrc, c.num_layers,
         g.num_kv_shared_layers);
  g.use_double_wide_mlp = get_or<bool>(raw, "use_double_wide_mlp", false);
  parse_moe(g, raw);
  bool k_eq_v = get_or<bool>(raw, "attention_k_eq_v", false);
  Overrides overrides = per_layer_overrides(c);
  const int first_shared = c.num_layers - g.num_kv_shared_layers;
  for (int i = 0; i < c.num_layers; i++) {
    Gemma4LayerSpec s;
    s.kind = c.layer_kinds[size_t(i)];
    s.window = c.window_for(i);
    s.head_dim = override_or(overrides, i, "head_dim", c.head_dim);
    s.num_kv_heads = override_or(overrides, i, "num_key_value_heads", c.num_kv_heads);
    s.num_heads = override_or(overrides, i, "num_attention_heads", c.num_heads);
    s.intermediate_size = override_or(overrides, i, "intermediate_size", c.intermediate_sizes[size_t(i)]);
    bool shared = g.num_kv_shared_layers > 0 && i >= first_shared;
    // HF's MLP tests `first_shared > 0` (its attention `>= 0`); equal here as first_shared >= 1.
    if (shared && g.use_double_wide_mlp) s.intermediate_size *= 2;
    if (shared) s.kv_source = kv_source_for(c, i, first_shared);
    s.k_eq_v = !shared && k_eq_v && s.kind == LayerKind::Full;
    validate_layer(s, i);
    g.layers.push_back(s);
  }
  for (size_t i = 0; i < g.layers.size(); i++) {
    const Gemma4LayerSpec& s = g.layers[i];
    if (!s.kv_source) continue;
    const Gemma4LayerSpec& src = g.layers[size_t(*s.kv_source)];
    if (src.head_dim != s.head_dim || src.num_kv_heads != s.num_kv_heads)
      fail("{}: layer {} reads layer {}'s KV but their geometry differs (head_dim {} vs {}, "
           "kv heads {} vs {})",
           kSrc, i, *s.kv_source, s.head_dim, src.head_dim, s.num_kv_heads, src.num_kv_heads);
  }
  return g;
}

}  // namespace tandem::arch
