// Gemma 4's and Gemma 3n's tensor-parallel split (gemma_tp.h).
#include "model/arch/gemma_tp.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "model/config.h"

namespace tandem::arch {

void check_gemma4_tp(const ModelConfig& c, const Gemma4Config& g, int size) {
  if (size <= 1) return;
  for (size_t i = 0; i < g.layers.size(); i++) {
    const Gemma4LayerSpec& s = g.layers[i];
    const std::string layer = fmt::format("layer {}'s ", i);
    check_tp_heads(s.num_heads, s.num_kv_heads, size, layer);
    check_tp_divides(s.intermediate_size, size, layer + "intermediate_size");
  }
  if (g.enable_moe_block) check_tp_divides(g.moe_intermediate_size, size, "moe_intermediate_size");
  check_tp_divides(c.vocab_size, size, "vocab_size");
  if (g.hidden_size_per_layer_input > 0)
    check_tp_divides(g.vocab_size_per_layer_input, size, "vocab_size_per_layer_input");
}

WeightSlicer gemma4_slicer(const ModelConfig& c, const Gemma4Config& g, const TpShard& tp) {
  return [c, g, tp](const std::string& name, int layer) -> WeightSlice {
    if (name == "embed" || name == "lm_head") return tp_vocab_rows(c.vocab_size, tp);
    if (name == "embed_per_layer") return tp_vocab_rows(g.vocab_size_per_layer_input, tp);
    if (layer >= 0) {
      const Gemma4LayerSpec& s = g.layers[size_t(layer)];
      const int64_t Dh = s.head_dim;
      if (name == "layers.{i}.qkv") return tp_qkv_rows(s.num_heads, s.num_kv_heads, Dh, 2, tp);
      if (name == "layers.{i}.qk") return tp_qkv_rows(s.num_heads, s.num_kv_heads, Dh, 1, tp);
      if (name == "layers.{i}.q") return tp_qkv_rows(s.num_heads, s.num_kv_heads, Dh, 0, tp);
      if (name == "layers.{i}.o") return tp_columns(s.num_heads * Dh, tp);
      if (name == "layers.{i}.gate_up") return tp_gate_up_rows(s.intermediate_size, tp);
      if (name == "layers.{i}.down") return tp_columns(s.intermediate_size, tp);
    }
    for (const char* whole :
         {"per_layer_projection", "per_layer_norm", "final_norm", "layers.{i}.input_norm",
          "layers.{i}.q_norm", "layers.{i}.k_norm", "layers.{i}.post_attn_norm",
          "layers.{i}.pre_ffn_norm", "layers.{i}.post_ffn_norm", "layers.{i}.post_ffn_norm_1",
          "layers.{i}.pre_ffn_norm_2", "layers.{i}.post_ffn_norm_2", "layers.{i}.router_scale",
          "layers.{i}.router", "layers.{i}.pli_gate", "layers.{i}.pli_proj", "layers.{i}.pli_norm"})
      if (name == whole) return {};
    fail("tensor parallelism: no split is defined for Gemma 4 weight '{}'", name);
  };
}

void check_gemma3n_tp(const ModelConfig& c, const Gemma3nConfig& g, int size) {
  if (size <= 1) return;
  check_tp_heads(c.num_heads, c.num_kv_heads, size, "");
  for (size_t i = 0; i < c.intermediate_sizes.size(); i++)
    check_tp_divides(c.intermediate_sizes[i], size, fmt::format("layer {}'s intermediate_size", i));
  check_tp_divides(c.vocab_size, size, "vocab_size");
  if (g.vocab_size_per_layer_input >= c.vocab_size)
    check_tp_divides(g.vocab_size_per_layer_input, size, "vocab_size_per_layer_input");
}

WeightSlicer gemma3n_slicer(const ModelConfig& c, const Gemma3nConfig& g, const TpShard& tp) {
  return [c, g, tp](const std::string& name, int layer) -> WeightSlice {
    const int Hq = c.num_heads, Hkv = c.num_kv_heads;
    const int64_t Dh = c.head_dim;
    if (name == "embed" || name == "lm_head") return tp_vocab_rows(c.vocab_size, tp);
    if (name == "embed_per_layer") return tp_vocab_rows(g.vocab_size_per_layer_input, tp);
    if (name == "layers.{i}.qkv" || name == "layers.{i}.qkv_bias")
      return tp_qkv_rows(Hq, Hkv, Dh, 2, tp);
    if (name == "layers.{i}.q" || name == "layers.{i}.q_bias")
      return tp_qkv_rows(Hq, Hkv, Dh, 0, tp);
    if (name == "layers.{i}.o") return tp_columns(Hq * Dh, tp);
    if (name == "layers.{i}.o_bias")  // added once, by rank 0, before the all-reduce
      return tp.rank == 0 ? WeightSlice{} : WeightSlice{.kind = WeightSlice::Kind::Absent};
    if (name == "layers.{i}.gate_up")
      return tp_gate_up_rows(c.intermediate_sizes[size_t(layer)], tp);
    if (name == "layers.{i}.down") return tp_columns(c.intermediate_sizes[size_t(layer)], tp);
    for (const char* whole : {"per_layer_projection",
                              "per_layer_norm",
                              "altup_in.{i}",
                              "altup_out.{i}",
                              "final_norm",
                              "layers.{i}.input_norm",
                              "layers.{i}.q_norm",
                              "layers.{i}.k_norm",
                              "layers.{i}.post_attn_norm",
                              "layers.{i}.pre_ffn_norm",
                              "layers.{i}.post_ffn_norm",
                              "layers.{i}.router_norm",
                              "layers.{i}.router",
                              "layers.{i}.predict_coefs",
                              "layers.{i}.correct_coefs",
                              "layers.{i}.output_scale",
                              "layers.{i}.laurel_left",
                              "layers.{i}.laurel_right",
                              "layers.{i}.laurel_norm",
                              "layers.{i}.pli_gate",
                              "layers.{i}.pli_proj",
                              "layers.{i}.pli_norm"})
      if (name == whole) return {};
    fail("tensor parallelism: no split is defined for Gemma 3n weight '{}'", name);
  };
}

Tensor gemma4_experts_gate_up_slice(const Tensor& gate_up, const TpShard& tp) {
  TANDEM_CHECK(gate_up.ndim() == 3 && !dtype_is_block(gate_up.dtype),
               "gemma4: stacked experts gate|up {} cannot be split", gate_up.shape.str());
  const int64_t E = gate_up.dim(0), Fe = gate_up.dim(1) / 2, D = gate_up.dim(2);
  const int64_t f = Fe / tp.size;
  Tensor out = Tensor::empty_host(gate_up.dtype, {E, 2 * f, D});
  const size_t row = dtype_row_bytes(gate_up.dtype, D), take = size_t(f) * row;
  const char* src = static_cast<const char*>(gate_up.data);
  char* dst = static_cast<char*>(out.data);
  for (int64_t e = 0; e < E; e++)
    for (int64_t half = 0; half < 2; half++)  // gate's rows, then up's
      std::memcpy(dst + size_t(e * 2 + half) * take,
                  src + size_t(e * 2 * Fe + half * Fe + tp.rank * f) * row, take);
  return out;
}

Tensor gemma4_experts_down_slice(const Tensor& down, const TpShard& tp) {
  return slice_parts({down}, tp_columns(down.dim(2), tp), "experts.down_proj",
                     [](const std::vector<Tensor>& parts) { return parts[0]; });
}

}  // namespace tandem::arch
