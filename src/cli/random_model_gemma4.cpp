#include "cli/random_model_gemma4.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "loader/random_fill.h"
#include "model/arch/gemma4_config.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;

struct Gemma4Shape {
  int hidden, layers, heads, kv_heads, head_dim, ffn;
  int full_head_dim;
  int full_kv_heads;      // 0 = same as kv_heads (no attention_k_eq_v)
  int sliding_window;
  int per_layer_input;    // hidden_size_per_layer_input, 0 = none
  int kv_shared_layers;
  int experts = 0, top_k = 0, expert_ffn = 0;
  int max_positions = 131072;
};

// A config as transformers 5.17 writes it: explicit layer_types (5 sliding : 1 full) and
// a per_layer_config giving full layers their head_dim (and KV heads with k_eq_v).
json gemma4_config(const Gemma4Shape& s) {
  json types = json::array(), per_layer = json::object();
  for (int i = 0; i < s.layers; i++) {
    bool full = (i + 1) % 6 == 0 || i == s.layers - 1;
    types.push_back(full ? "full_attention" : "sliding_attention");
    if (!full) continue;
    json o = {{"head_dim", s.full_head_dim}};
    if (s.full_kv_heads > 0) o["num_key_value_heads"] = s.full_kv_heads;
    per_layer[std::to_string(i)] = o;
  }
  bool moe = s.experts > 0;
  return {{"architectures", {"Gemma4ForCausalLM"}}, {"model_type", "gemma4_text"},
          {"vocab_size", 262144}, {"hidden_size", s.hidden}, {"intermediate_size", s.ffn},
          {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads}, {"head_dim", s.head_dim},
          {"hidden_activation", "gelu_pytorch_tanh"}, {"rms_norm_eps", 1e-6},
          {"max_position_embeddings", s.max_positions}, {"sliding_window", s.sliding_window},
          {"layer_types", types}, {"per_layer_config", per_layer},
          {"rope_parameters",
           {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
            {"full_attention",
             {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25},
              {"rope_theta", 1000000.0}}}}},
          {"final_logit_softcapping", 30.0}, {"tie_word_embeddings", true},
          {"attention_k_eq_v", s.full_kv_heads > 0}, {"attention_bias", false},
          {"hidden_size_per_layer_input", s.per_layer_input},
          {"vocab_size_per_layer_input", 262144}, {"num_kv_shared_layers", s.kv_shared_layers},
          {"use_double_wide_mlp", false}, {"enable_moe_block", moe},
          {"num_experts", moe ? json(s.experts) : json()},
          {"top_k_experts", moe ? json(s.top_k) : json()},
          {"moe_intermediate_size", moe ? json(s.expert_ffn) : json()},
          {"pad_token_id", 0}, {"bos_token_id", 2}, {"eos_token_id", 1}};
}

}  // namespace

// The published shapes as far as they can be inferred (transformers' configuration_gemma4.py
// defaults, the model names, and configs quoted by other projects); assumptions noted.
std::optional<json> gemma4_preset(const std::string& name) {
  if (name == "gemma-4-e4b")
    // 42 layers of 2560, 8 query / 2 KV heads of 256 (full layers: head_dim 512, no
    // k_eq_v), FFN 10240, window 512, 256-wide per-layer inputs, the last 18 layers
    // reading earlier layers' KV. Assumed: no double-wide MLP (E2B's trait).
    return gemma4_config({2560, 42, 8, 2, 256, 10240, 512, 0, 512, 256, 18});
  if (name == "gemma-4-26b-a4b")
    // 30 layers of 2816, 16 query heads; sliding layers 8 KV heads of 256, full layers 2
    // (k_eq_v) of 512; window 1024; dense FFN 2112 beside 128 experts of 704, top 8;
    // no per-layer inputs, no KV sharing; 256K context.
    return gemma4_config({2816, 30, 16, 8, 256, 2112, 512, 2, 1024, 0, 0, 128, 8, 704, 262144});
  if (name == "gemma-4-12b")
    // Assumed (no published config at hand): Gemma 3 12B's trunk (48 layers of 3840, 16
    // query / 8 KV heads of 256, FFN 15360) with the large Gemma 4 conventions of the
    // 26B/31B: window 1024, full layers 512-wide with k_eq_v and a quarter of the KV heads
    // (2), no per-layer inputs, no KV sharing, 256K context.
    return gemma4_config({3840, 48, 16, 8, 256, 15360, 512, 2, 1024, 0, 0, 0, 0, 0, 262144});
  return std::nullopt;
}

void add_gemma4_tensors(SafetensorsWriter& w, ModelConfig c, DType dtype, uint64_t seed) {
  arch::apply_gemma4_defaults(c);
  const arch::Gemma4Config g = arch::parse_gemma4_config(c);
  const int64_t D = c.hidden_size, V = c.vocab_size, L = c.num_layers;
  const int64_t P = g.hidden_size_per_layer_input;
  uint64_t counter = seed * 1000003;
  auto normal = [&](std::string name, std::vector<int64_t> shape, int64_t fan_in) {
    float std = float(1.0 / std::sqrt(double(fan_in)));
    w.add_chunked(std::move(name), dtype, std::move(shape), random_chunk_fill(dtype, counter++, std));
  };
  auto ones = [&](std::string name, int64_t n) {
    w.add(std::move(name), dtype, {n}, [=](void* dst, size_t) {
      std::vector<float> one(size_t(n), 1.f);
      convert_from_f32(one.data(), dst, dtype, size_t(n));
    });
  };
  normal("model.embed_tokens.weight", {V, D}, D);
  ones("model.norm.weight", D);
  if (!c.tie_word_embeddings) normal("lm_head.weight", {V, D}, D);
  if (P > 0) {
    normal("model.embed_tokens_per_layer.weight", {g.vocab_size_per_layer_input, L * P}, P);
    normal("model.per_layer_model_projection.weight", {L * P, D}, D);
    ones("model.per_layer_projection_norm.weight", P);
  }
  for (int i = 0; i < L; i++) {
    const arch::Gemma4LayerSpec& s = g.layers[size_t(i)];
    const std::string p = fmt::format("model.layers.{}.", i), a = p + "self_attn.";
    const int64_t Dh = s.head_dim, Hq = s.num_heads, Hkv = s.num_kv_heads, F = s.intermediate_size;
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm"})
      ones(p + n + ".weight", D);
    ones(p + "layer_scalar", 1);
    normal(a + "q_proj.weight", {Hq * Dh, D}, D);
    ones(a + "q_norm.weight", Dh);
    if (!s.kv_source) {
      normal(a + "k_proj.weight", {Hkv * Dh, D}, D);
      if (!s.k_eq_v) normal(a + "v_proj.weight", {Hkv * Dh, D}, D);
      ones(a + "k_norm.weight", Dh);
    }
    normal(a + "o_proj.weight", {D, Hq * Dh}, Hq * Dh);
    normal(p + "mlp.gate_proj.weight", {F, D}, D);
    normal(p + "mlp.up_proj.weight", {F, D}, D);
    normal(p + "mlp.down_proj.weight", {D, F}, F);
    if (g.enable_moe_block) {
      const int64_t E = g.num_experts, Fe = g.moe_intermediate_size;
      for (const char* n : {"post_feedforward_layernorm_1", "pre_feedforward_layernorm_2",
                            "post_feedforward_layernorm_2"})
        ones(p + n + ".weight", D);
      normal(p + "router.proj.weight", {E, D}, D);
      ones(p + "router.scale", D);
      ones(p + "router.per_expert_scale", E);
      normal(p + "experts.gate_up_proj", {E, 2 * Fe, D}, D);
      normal(p + "experts.down_proj", {E, D, Fe}, Fe);
    }
    if (P > 0) {
      normal(p + "per_layer_input_gate.weight", {P, D}, D);
      normal(p + "per_layer_projection.weight", {D, P}, P);
      ones(p + "post_per_layer_input_norm.weight", D);
    }
  }
}

}  // namespace tandem::cli
