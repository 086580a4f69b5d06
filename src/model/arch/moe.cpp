// Mixture-of-experts decoders: Mixtral (softmax → top-k → renormalize, experts w1/w3/w2)
// and Qwen3-MoE (the same routing, renormalizing only when norm_topk_prob; Qwen3's q/k
// norms). Per-expert checkpoint tensors are stacked by the map into [E, ...] weights.
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/decoder.h"

namespace tandem::arch {

std::unique_ptr<Model> build_mixtral(ModelConfig c, const Checkpoint& ck, Backend& be) {
  WeightMap map = llama_style_weight_map();
  const std::string M = "model.layers.{i}.block_sparse_moe.";
  set_rule(map, {"layers.{i}.router", {M + "gate.weight"}});
  set_rule(map, {"layers.{i}.experts_gate_up", {M + "experts.{e}.w1.weight", M + "experts.{e}.w3.weight"}});
  set_rule(map, {"layers.{i}.experts_down", {M + "experts.{e}.w2.weight"}});
  return std::make_unique<DecoderModel>(std::move(c), DecoderTraits{}, map, ck, be);
}

std::unique_ptr<Model> build_qwen3_moe(ModelConfig c, const Checkpoint& ck, Backend& be) {
  WeightMap map = llama_style_weight_map();
  const std::string L = "model.layers.{i}.";
  const std::string M = L + "mlp.";
  set_rule(map, {"layers.{i}.q_norm", {L + "self_attn.q_norm.weight"}});
  set_rule(map, {"layers.{i}.k_norm", {L + "self_attn.k_norm.weight"}});
  set_rule(map, {"layers.{i}.router", {M + "gate.weight"}});
  set_rule(map, {"layers.{i}.experts_gate_up", {M + "experts.{e}.gate_proj.weight", M + "experts.{e}.up_proj.weight"}});
  set_rule(map, {"layers.{i}.experts_down", {M + "experts.{e}.down_proj.weight"}});
  DecoderTraits traits;
  traits.moe_renormalize = c.norm_topk_prob;
  return std::make_unique<DecoderModel>(std::move(c), traits, map, ck, be);
}

}  // namespace tandem::arch
