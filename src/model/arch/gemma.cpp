// Gemma 2 and Gemma 3 (text): (1 + w) RMSNorms, embeddings scaled by sqrt(hidden), GELU-tanh,
// "sandwich" norms around attention and the MLP, query_pre_attn_scalar; Gemma 2 adds
// attention and final-logit softcapping, Gemma 3 q/k norms and a RoPE θ per layer type.
// All of these come from the config and the weight map.
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/multimodal_names.h"

namespace tandem::arch {
namespace {

WeightMap gemma_weight_map() {
  WeightMap map = llama_style_weight_map();
  const std::string L = "model.layers.{i}.";
  set_rule(map, {"layers.{i}.post_attn_norm", {L + "post_attention_layernorm.weight"}});
  set_rule(map, {"layers.{i}.ffn_norm", {L + "pre_feedforward_layernorm.weight"}});
  set_rule(map, {"layers.{i}.post_ffn_norm", {L + "post_feedforward_layernorm.weight"}});
  return map;
}

DecoderTraits gemma_traits() {
  DecoderTraits t;
  t.norm_weight_offset = 1.f;
  t.scale_embeddings = true;
  return t;
}

}  // namespace

std::unique_ptr<Model> build_gemma2(ModelConfig c, const Checkpoint& ck, Backend& be) {
  return std::make_unique<DecoderModel>(std::move(c), gemma_traits(), gemma_weight_map(), ck, be);
}

// A multimodal file keeps the same text model under its own prefix (multimodal_names.h).
std::unique_ptr<Model> build_gemma3(ModelConfig c, const Checkpoint& ck, Backend& be) {
  WeightMap map = gemma_weight_map();
  const std::string L = "model.layers.{i}.";
  set_rule(map, {"layers.{i}.q_norm", {L + "self_attn.q_norm.weight"}});
  set_rule(map, {"layers.{i}.k_norm", {L + "self_attn.k_norm.weight"}});
  map = rebase_text_map(std::move(map), text_model_prefix(ck), ck);
  return std::make_unique<DecoderModel>(std::move(c), gemma_traits(), map, ck, be);
}

}  // namespace tandem::arch
