#include "model/arch/gemma3n_config.h"

#include <nlohmann/json.hpp>
#include <cmath>
#include <string>

#include "core/error.h"

namespace tandem::arch {
namespace {

using json = nlohmann::json;

// An optional field of config.json; null counts as absent (HF's None).
template <typename T>
T field_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail("config.json: field '{}' has the wrong type ({})", key, it->dump());
  }
}

bool has_value(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// Gemma3nTextConfig.convert_rope_params_to_dict: a RoPE section per layer type; full
// layers default to θ = rope_theta or 1e6, sliding ones to rope_local_base_freq or 1e4,
// and rope_scaling only ever applies to full layers. ModelConfig parsed the explicit
// values; this replaces what it filled with generic defaults.
void fix_rope(ModelConfig& c) {
  const json& j = c.raw();
  const double full_theta = field_or<double>(j, "rope_theta", 1e6);
  const double local_theta = field_or<double>(j, "rope_local_base_freq", 1e4);
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = &*it;
  auto section = [&](const char* key) -> const json* {
    if (!params) return nullptr;
    auto it = params->find(key);
    return it != params->end() && it->is_object() ? &*it : nullptr;
  };
  const json* full = section("full_attention");
  const json* sliding = section("sliding_attention");
  if (full || sliding) {
    if (!full) c.rope[LayerKind::Full] = RopeConfig{};
    if (!full || !has_value(*full, "rope_theta")) c.rope[LayerKind::Full].theta = full_theta;
  } else {  // flat rope_parameters or rope_scaling: the full layers' settings
    const json* flat = params;
    if (auto it = j.find("rope_scaling"); !flat && it != j.end() && it->is_object()) flat = &*it;
    if (!flat || !has_value(*flat, "rope_theta")) c.rope[LayerKind::Full].theta = full_theta;
  }
  if (!sliding) c.rope[LayerKind::Sliding] = RopeConfig{};
  if (!sliding || !has_value(*sliding, "rope_theta"))
    c.rope[LayerKind::Sliding].theta = local_theta;
}

// layer_types defaults to four sliding layers then one full; the window to 512; the
// final logit softcap to 30.
void fix_layers(ModelConfig& c) {
  c.sliding_window = field_or<int>(c.raw(), "sliding_window", 512);
  if (!has_value(c.raw(), "layer_types")) {
    c.layer_kinds.clear();
    for (int i = 0; i < c.num_layers; i++)
      c.layer_kinds.push_back((i + 1) % 5 == 0 ? LayerKind::Full : LayerKind::Sliding);
  }
  if (c.sliding_window <= 0)
    fail("config.json: sliding_window must be > 0 (got {})", c.sliding_window);
  // Absent means HF's default 30; an explicit null means none (ModelConfig read it as 0).
  if (!c.raw().contains("final_logit_softcapping")) c.final_logit_softcap = 30.f;
}

// Default: the first 10 layers 95% sparse when there are more than 10, else none.
std::vector<float> parse_sparsity(const ModelConfig& c) {
  const int L = c.num_layers;
  std::vector<float> p(size_t(L), 0.f);
  if (!has_value(c.raw(), "activation_sparsity_pattern")) {
    if (L > 10) std::fill(p.begin(), p.begin() + 10, 0.95f);
    return p;
  }
  p = field_or<std::vector<float>>(c.raw(), "activation_sparsity_pattern", {});
  if (int(p.size()) != L)
    fail("config.json: activation_sparsity_pattern has {} entries for {} layers", p.size(), L);
  for (float v : p)
    if (!(v >= 0.f && v < 1.f))
      fail("config.json: activation_sparsity_pattern value {} is outside [0, 1)", v);
  return p;
}

// The last num_kv_shared_layers layers read the KV of the last earlier layer of their
// own kind (HF's kv_shared_layer_index); a kind with no earlier layer is an error there.
std::vector<std::optional<int>> kv_sources(const ModelConfig& c, int num_shared) {
  const int L = c.num_layers, first = L - num_shared;
  std::vector<std::optional<int>> src(static_cast<size_t>(L));
  if (first <= 0) return src;
  for (int i = first; i < L; i++) {
    for (int j = first - 1; j >= 0 && !src[size_t(i)]; j--)
      if (c.layer_kinds[size_t(j)] == c.layer_kinds[size_t(i)]) src[size_t(i)] = j;
    if (!src[size_t(i)])
      fail(
          "config.json: layer {} shares KV (num_kv_shared_layers = {}) but no earlier layer "
          "has its attention type",
          i, num_shared);
  }
  return src;
}

void check_positive(const char* name, int v) {
  if (v <= 0) fail("config.json: {} must be > 0 (got {})", name, v);
}

}  // namespace

Gemma3nConfig Gemma3nConfig::parse(ModelConfig& c) {
  const json& j = c.raw();
  Gemma3nConfig g;
  g.altup_num_inputs = field_or<int>(j, "altup_num_inputs", 4);
  g.altup_active_idx = field_or<int>(j, "altup_active_idx", 0);
  g.altup_correct_scale = field_or<bool>(j, "altup_correct_scale", true);
  g.laurel_rank = field_or<int>(j, "laurel_rank", 64);
  g.hidden_size_per_layer_input = field_or<int>(j, "hidden_size_per_layer_input", 256);
  g.vocab_size_per_layer_input = field_or<int>(j, "vocab_size_per_layer_input", 262144);
  g.num_kv_shared_layers = field_or<int>(j, "num_kv_shared_layers", 15);
  g.tie_word_embeddings = field_or<bool>(j, "tie_word_embeddings", true);
  check_positive("altup_num_inputs", g.altup_num_inputs);
  check_positive("laurel_rank", g.laurel_rank);
  check_positive("hidden_size_per_layer_input", g.hidden_size_per_layer_input);
  check_positive("vocab_size_per_layer_input", g.vocab_size_per_layer_input);
  if (g.altup_active_idx < 0 || g.altup_active_idx >= g.altup_num_inputs)
    fail("config.json: altup_active_idx {} is outside 0..{}", g.altup_active_idx,
         g.altup_num_inputs - 1);
  fix_layers(c);
  fix_rope(c);
  c.tie_word_embeddings = g.tie_word_embeddings;
  g.activation_sparsity = parse_sparsity(c);
  g.kv_source = kv_sources(c, g.num_kv_shared_layers);
  return g;
}

// Bisection on Φ(x) = erfc(-x/√2) / 2, which is monotone: 200 halvings of [-40, 40]
// reach double precision, with no approximation constants to trust.
double normal_icdf(double p) {
  if (!(p > 0 && p < 1)) fail("normal_icdf: p = {} is outside (0, 1)", p);
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 0; i++) {
    double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace tandem::arch
