// Qwen2 / 2.5 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm, no biases): Llama's
// network; the optional rules of the Llama-style map pick up the differences.
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/decoder.h"

namespace tandem::arch {

std::unique_ptr<Model> build_qwen2(ModelConfig c, const Checkpoint& ck, Backend& be) {
  WeightMap map = llama_style_weight_map();
  const std::string L = "model.layers.{i}.";
  // Qwen2 always carries q/k/v biases: make them required.
  set_rule(map, {"layers.{i}.qkv_bias",
                 {L + "self_attn.q_proj.bias", L + "self_attn.k_proj.bias", L + "self_attn.v_proj.bias"}});
  return std::make_unique<DecoderModel>(std::move(c), DecoderTraits{}, map, ck, be);
}

std::unique_ptr<Model> build_qwen3(ModelConfig c, const Checkpoint& ck, Backend& be) {
  WeightMap map = llama_style_weight_map();
  const std::string L = "model.layers.{i}.";
  set_rule(map, {"layers.{i}.q_norm", {L + "self_attn.q_norm.weight"}});
  set_rule(map, {"layers.{i}.k_norm", {L + "self_attn.k_norm.weight"}});
  return std::make_unique<DecoderModel>(std::move(c), DecoderTraits{}, map, ck, be);
}

}  // namespace tandem::arch
