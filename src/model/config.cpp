#include "model/config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/multimodal_config.h"

namespace tandem {
namespace {

using json = nlohmann::json;

constexpr int kMaxLayers = 1 << 16;

// An integer field as T, or an error naming it and its value: json's own conversion would
// wrap 2^40 to 0 without a word.
template <typename T>
T checked_integer(const json& v, const char* key, const std::string& src) {
  const bool integral_float = v.is_number_float() && std::isfinite(v.get<double>()) &&
                              std::floor(v.get<double>()) == v.get<double>();
  if (!v.is_number_integer() && !integral_float)
    fail("{}: field '{}' has the wrong type ({})", src, key, v.dump());
  const long double x = v.is_number_unsigned() ? (long double)v.get<uint64_t>()
                        : v.is_number_integer() ? (long double)v.get<int64_t>()
                                                : (long double)v.get<double>();
  if (x < (long double)std::numeric_limits<T>::min() || x > (long double)std::numeric_limits<T>::max())
    fail("{}: field '{}' is {}, outside the range tandem reads ({}..{})", src, key, v.dump(),
         std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  return T(x);
}

// Reads an optional field; a present field of the wrong type is an error naming it.
template <typename T>
std::optional<T> opt(const json& j, const char* key, const std::string& src) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return checked_integer<T>(*it, key, src);
  } else {
    try {
      return it->get<T>();
    } catch (const json::exception&) {
      fail("{}: field '{}' has the wrong type ({})", src, key, it->dump());
    }
  }
}

template <typename T>
T req(const json& j, const char* key, const std::string& src) {
  auto v = opt<T>(j, key, src);
  if (!v) fail("{}: required field '{}' is missing", src, key);
  return *v;
}

RopeConfig parse_rope(const json& p, const json& top, const std::string& src) {
  RopeConfig r;
  r.type = opt<std::string>(p, "rope_type", src).value_or(opt<std::string>(p, "type", src).value_or("default"));
  r.theta = opt<double>(p, "rope_theta", src).value_or(opt<double>(top, "rope_theta", src).value_or(10000.0));
  r.partial_rotary_factor = opt<double>(p, "partial_rotary_factor", src)
                                .value_or(opt<double>(top, "partial_rotary_factor", src).value_or(1.0));
  r.factor = opt<double>(p, "factor", src).value_or(1.0);
  r.attention_factor = opt<double>(p, "attention_factor", src);
  r.low_freq_factor = opt<double>(p, "low_freq_factor", src).value_or(1.0);
  r.high_freq_factor = opt<double>(p, "high_freq_factor", src).value_or(4.0);
  r.original_max_position_embeddings = opt<int>(p, "original_max_position_embeddings", src);
  if (!r.original_max_position_embeddings)
    r.original_max_position_embeddings = opt<int>(top, "original_max_position_embeddings", src);
  r.beta_fast = opt<double>(p, "beta_fast", src);
  r.beta_slow = opt<double>(p, "beta_slow", src);
  r.mscale = opt<double>(p, "mscale", src);
  r.mscale_all_dim = opt<double>(p, "mscale_all_dim", src);
  r.truncate = opt<bool>(p, "truncate", src).value_or(true);
  r.short_factor = opt<std::vector<double>>(p, "short_factor", src).value_or(std::vector<double>{});
  r.long_factor = opt<std::vector<double>>(p, "long_factor", src).value_or(std::vector<double>{});
  if (r.type == "su") r.type = "longrope";
  static const char* known[] = {"default", "linear", "dynamic", "llama3", "yarn", "longrope",
                                "proportional"};
  bool ok = false;
  for (auto* k : known) ok = ok || r.type == k;
  if (!ok) fail("{}: unsupported rope_type '{}'", src, r.type);
  if (!(r.theta > 0)) fail("{}: rope_theta must be > 0 (got {})", src, r.theta);
  if (!(r.factor > 0)) fail("{}: rope factor must be > 0 (got {})", src, r.factor);
  return r;
}

// rope_parameters (flat, or keyed by layer type) or rope_theta + rope_scaling.
void parse_rope_section(ModelConfig& c, const json& j, const std::string& src) {
  json params = json::object();
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = *it;
  else if (auto sc = j.find("rope_scaling"); sc != j.end() && sc->is_object()) params = *sc;

  auto per_type = [&](const char* key) -> const json* {
    auto it = params.find(key);
    return it != params.end() && it->is_object() ? &*it : nullptr;
  };
  const json* full = per_type("full_attention");
  const json* sliding = per_type("sliding_attention");
  if (full || sliding) {
    c.rope[LayerKind::Full] = parse_rope(full ? *full : json::object(), j, src);
    c.rope[LayerKind::Sliding] = parse_rope(sliding ? *sliding : *full, j, src);
    return;
  }
  RopeConfig r = parse_rope(params, j, src);
  c.rope[LayerKind::Full] = r;
  // Older Gemma 3 spelling: sliding layers use `rope_local_base_freq` and no scaling.
  if (auto local = opt<double>(j, "rope_local_base_freq", src)) {
    RopeConfig s;
    s.theta = *local;
    c.rope[LayerKind::Sliding] = s;
  } else {
    c.rope[LayerKind::Sliding] = r;
  }
}

void parse_layer_kinds(ModelConfig& c, const json& j, const std::string& src) {
  c.sliding_window = opt<int>(j, "sliding_window", src).value_or(0);
  if (auto types = opt<std::vector<std::string>>(j, "layer_types", src)) {
    if (int(types->size()) != c.num_layers)
      fail("{}: layer_types has {} entries but num_hidden_layers is {}", src, types->size(),
           c.num_layers);
    for (auto& t : *types) {
      if (t == "full_attention") c.layer_kinds.push_back(LayerKind::Full);
      else if (t == "sliding_attention") c.layer_kinds.push_back(LayerKind::Sliding);
      else fail("{}: unsupported layer type '{}' in layer_types", src, t);
    }
  } else {
    // No layer_types: a sliding_window applies to every layer (Mistral, Phi-3), unless
    // the config turns it off (Qwen2's use_sliding_window) or limits it (max_window_layers).
    bool use = c.sliding_window > 0 && opt<bool>(j, "use_sliding_window", src).value_or(true);
    int first = opt<bool>(j, "use_sliding_window", src) ? opt<int>(j, "max_window_layers", src).value_or(0) : 0;
    for (int i = 0; i < c.num_layers; i++)
      c.layer_kinds.push_back(use && i >= first ? LayerKind::Sliding : LayerKind::Full);
  }
  bool any_sliding = false;
  for (auto k : c.layer_kinds) any_sliding |= k == LayerKind::Sliding;
  if (any_sliding && c.sliding_window <= 0)
    fail("{}: sliding layers need sliding_window > 0 (got {})", src, c.sliding_window);
}

std::vector<int32_t> parse_ids(const json& v, const std::string& src) {
  std::vector<int32_t> ids;
  if (v.is_number_integer()) ids.push_back(checked_integer<int32_t>(v, "eos_token_id", src));
  else if (v.is_array())
    for (auto& x : v)
      if (x.is_number_integer()) ids.push_back(checked_integer<int32_t>(x, "eos_token_id", src));
  return ids;
}

void validate(const ModelConfig& c, const std::string& src) {
  auto positive = [&](const char* name, long v) {
    if (v <= 0) fail("{}: {} must be > 0 (got {})", src, name, v);
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("num_hidden_layers", c.num_layers);
  positive("num_attention_heads", c.num_heads);
  positive("num_key_value_heads", c.num_kv_heads);
  positive("head_dim", c.head_dim);
  for (int f : c.intermediate_sizes) positive("intermediate_size", f);
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", src,
         c.num_heads, c.num_kv_heads);
  if (c.head_dim % 2 != 0) fail("{}: head_dim must be even (got {})", src, c.head_dim);
  if (c.num_experts > 0 && (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts))
    fail("{}: num_experts_per_tok ({}) must be in 1..{}", src, c.num_experts_per_tok,
         c.num_experts);
  if (!(c.rms_norm_eps >= 0)) fail("{}: rms_norm_eps must be >= 0", src);
  for (int32_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size)
      fail("{}: eos_token_id {} is outside the vocabulary (0..{})", src, id, c.vocab_size - 1);
}

}  // namespace

const json& ModelConfig::raw() const {
  static const json empty = json::object();
  return raw_json ? *raw_json : empty;
}

const json& ModelConfig::multimodal_raw() const {
  static const json null;
  return multimodal_json ? *multimodal_json : null;
}

ModelConfig ModelConfig::parse(const json& j, const std::string& src) {
  if (!j.is_object()) fail("{}: not a JSON object", src);
  if (is_multimodal_config(j)) {
    ModelConfig c = parse(text_model_config(j, src), src + " (text_config)");
    c.multimodal_type = req<std::string>(j, "model_type", src);
    c.multimodal_json = std::make_shared<const json>(j);
    return c;
  }
  ModelConfig c;
  c.raw_json = std::make_shared<const json>(j);
  c.model_type = req<std::string>(j, "model_type", src);
  c.vocab_size = req<int>(j, "vocab_size", src);
  c.hidden_size = req<int>(j, "hidden_size", src);
  c.num_layers = req<int>(j, "num_hidden_layers", src);
  // Per-layer state is sized by this before any tensor is read: bound it first (the largest
  // models have a few hundred layers; load_model then checks it against the checkpoint).
  if (c.num_layers > kMaxLayers)
    fail("{}: num_hidden_layers is {}; tandem reads at most {} layers", src, c.num_layers, kMaxLayers);
  c.num_heads = req<int>(j, "num_attention_heads", src);
  c.num_kv_heads = opt<int>(j, "num_key_value_heads", src).value_or(c.num_heads);
  if (c.num_heads > 0 && !j.contains("head_dim") && c.hidden_size % c.num_heads != 0)
    fail("{}: hidden_size ({}) is not a multiple of num_attention_heads ({})", src, c.hidden_size,
         c.num_heads);
  c.head_dim = opt<int>(j, "head_dim", src).value_or(c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  if (auto v = j.find("intermediate_size"); v != j.end() && v->is_array()) {
    c.intermediate_sizes = opt<std::vector<int>>(j, "intermediate_size", src).value();
    if (int(c.intermediate_sizes.size()) != c.num_layers)
      fail("{}: intermediate_size has {} entries for {} layers", src, c.intermediate_sizes.size(),
           c.num_layers);
    c.intermediate_size = c.intermediate_sizes.empty() ? 0 : c.intermediate_sizes[0];
  } else {
    c.intermediate_size = opt<int>(j, "intermediate_size", src).value_or(0);
    c.intermediate_sizes.assign(size_t(std::max(c.num_layers, 0)), c.intermediate_size);
  }
  c.rms_norm_eps = float(opt<double>(j, "rms_norm_eps", src).value_or(1e-6));
  c.max_position_embeddings = opt<int>(j, "max_position_embeddings", src).value_or(4096);
  c.tie_word_embeddings = opt<bool>(j, "tie_word_embeddings", src).value_or(false);
  std::string act = opt<std::string>(j, "hidden_activation", src)
                        .value_or(opt<std::string>(j, "hidden_act", src).value_or("silu"));
  if (act == "silu" || act == "swish") c.activation = Activation::SiLU;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu_new")
    c.activation = Activation::GeluTanh;
  else fail("{}: unsupported activation '{}'", src, act);
  c.attention_bias = opt<bool>(j, "attention_bias", src).value_or(false);
  c.mlp_bias = opt<bool>(j, "mlp_bias", src).value_or(false);
  c.attn_logit_softcap = float(opt<double>(j, "attn_logit_softcapping", src).value_or(0.0));
  c.final_logit_softcap = float(opt<double>(j, "final_logit_softcapping", src).value_or(0.0));
  c.query_pre_attn_scalar = opt<double>(j, "query_pre_attn_scalar", src);

  c.num_experts = opt<int>(j, "num_local_experts", src).value_or(opt<int>(j, "num_experts", src).value_or(0));
  c.num_experts_per_tok = opt<int>(j, "num_experts_per_tok", src).value_or(opt<int>(j, "top_k_experts", src).value_or(0));
  c.moe_intermediate_size = opt<int>(j, "moe_intermediate_size", src).value_or(c.intermediate_size);
  c.norm_topk_prob = opt<bool>(j, "norm_topk_prob", src).value_or(true);
  c.decoder_sparse_step = opt<int>(j, "decoder_sparse_step", src).value_or(1);
  c.mlp_only_layers = opt<std::vector<int>>(j, "mlp_only_layers", src).value_or(std::vector<int>{});

  if (auto e = j.find("eos_token_id"); e != j.end()) c.eos_token_ids = parse_ids(*e, src);
  c.bos_token_id = opt<int32_t>(j, "bos_token_id", src);
  parse_layer_kinds(c, j, src);
  parse_rope_section(c, j, src);
  validate(c, src);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& dir) {
  auto path = dir / "config.json";
  std::ifstream in(path);
  if (!in) fail("{}: cannot open (is this a Hugging Face model folder?)", path.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
  ModelConfig c = parse(j, path.string());
  // generation_config.json's eos_token_id wins (it lists every stop id of chat models).
  std::ifstream gen(dir / "generation_config.json");
  if (gen) {
    json g = json::parse(gen, nullptr, /*allow_exceptions=*/false);
    if (g.is_object())
      if (auto e = g.find("eos_token_id"); e != g.end()) {
        auto ids = parse_ids(*e, (dir / "generation_config.json").string());
        if (!ids.empty()) c.eos_token_ids = ids;
      }
  }
  validate(c, path.string());
  return c;
}

}  // namespace tandem
