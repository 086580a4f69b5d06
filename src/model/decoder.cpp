#include "model/decoder.h"

#include <cmath>

#include "core/error.h"
#include "model/rope.h"

namespace tandem {

WeightMap llama_style_weight_map() {
  const std::string L = "model.layers.{i}.";
  return {
      {"embed", {"model.embed_tokens.weight"}},
      {"final_norm", {"model.norm.weight"}},
      {"lm_head", {"lm_head.weight"}, /*optional=*/true},
      {"layers.{i}.attn_norm", {L + "input_layernorm.weight"}},
      {"layers.{i}.qkv", {L + "self_attn.q_proj.weight", L + "self_attn.k_proj.weight", L + "self_attn.v_proj.weight"}},
      {"layers.{i}.qkv_bias", {L + "self_attn.q_proj.bias", L + "self_attn.k_proj.bias", L + "self_attn.v_proj.bias"}, true},
      {"layers.{i}.q_norm", {L + "self_attn.q_norm.weight"}, true},
      {"layers.{i}.k_norm", {L + "self_attn.k_norm.weight"}, true},
      {"layers.{i}.o", {L + "self_attn.o_proj.weight"}},
      {"layers.{i}.o_bias", {L + "self_attn.o_proj.bias"}, true},
      {"layers.{i}.ffn_norm", {L + "post_attention_layernorm.weight"}},
      {"layers.{i}.gate_up", {L + "mlp.gate_proj.weight", L + "mlp.up_proj.weight"}},
      {"layers.{i}.gate_up_bias", {L + "mlp.gate_proj.bias", L + "mlp.up_proj.bias"}, true},
      {"layers.{i}.down", {L + "mlp.down_proj.weight"}},
      {"layers.{i}.down_bias", {L + "mlp.down_proj.bias"}, true},
  };
}

DecoderModel::DecoderModel(ModelConfig config, DecoderTraits traits, WeightMap map,
                           const Checkpoint& checkpoint, Backend& backend)
    : Model(std::move(config)), traits_(traits), backend_(backend) {
  const ModelConfig& c = config_;
  WeightLoader w(checkpoint, backend, std::move(map), c.num_experts);
  int64_t V = c.vocab_size, D = c.hidden_size;
  embed_ = w.load("embed", -1, {V, D});
  final_norm_ = w.load("final_norm", -1, {D});
  lm_head_ = w.load_lm_head(embed_, {V, D}, c.tie_word_embeddings);
  layers_.resize(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; i++) load_layer(w, i);
  num_parameters_ = w.num_parameters();
}

void DecoderModel::load_layer(WeightLoader& w, int i) {
  const ModelConfig& c = config_;
  DecoderLayer& l = layers_[size_t(i)];
  int64_t D = c.hidden_size, Dh = c.head_dim, F = c.intermediate_sizes[size_t(i)];
  int64_t QKV = (c.num_heads + 2 * c.num_kv_heads) * Dh;
  l.attn_norm = w.load("layers.{i}.attn_norm", i, {D});
  l.qkv = w.load("layers.{i}.qkv", i, {QKV, D});
  l.qkv_bias = w.load("layers.{i}.qkv_bias", i, {QKV}, false);
  l.q_norm = w.load("layers.{i}.q_norm", i, {Dh}, false);
  l.k_norm = w.load("layers.{i}.k_norm", i, {Dh}, false);
  l.o = w.load("layers.{i}.o", i, {D, c.num_heads * Dh});
  l.o_bias = w.load("layers.{i}.o_bias", i, {D}, false);
  l.post_attn_norm = w.load("layers.{i}.post_attn_norm", i, {D}, false);
  l.ffn_norm = w.load("layers.{i}.ffn_norm", i, {D});
  l.post_ffn_norm = w.load("layers.{i}.post_ffn_norm", i, {D}, false);
  bool sparse = c.num_experts > 0 && (i + 1) % c.decoder_sparse_step == 0 &&
                std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), i) == c.mlp_only_layers.end();
  if (sparse) {
    int64_t E = c.num_experts, Fe = c.moe_intermediate_size;
    l.router = w.load("layers.{i}.router", i, {E, D});
    l.experts_gate_up = w.load("layers.{i}.experts_gate_up", i, {E, 2 * Fe, D});
    l.experts_down = w.load("layers.{i}.experts_down", i, {E, D, Fe});
  } else {
    l.gate_up = w.load("layers.{i}.gate_up", i, {2 * F, D});
    l.gate_up_bias = w.load("layers.{i}.gate_up_bias", i, {2 * F}, false);
    l.down = w.load("layers.{i}.down", i, {D, F});
    l.down_bias = w.load("layers.{i}.down_bias", i, {D}, false);
  }
  l.rope = make_rope(c.rope_for(i), c.head_dim, c.max_position_embeddings);
  l.attention.scale = float(1.0 / std::sqrt(c.query_pre_attn_scalar.value_or(double(Dh))));
  l.attention.softcap = c.attn_logit_softcap;
  l.attention.window = c.window_for(i);
}

std::vector<LayerKvSpec> DecoderModel::kv_specs() const {
  std::vector<LayerKvSpec> specs;
  for (int i = 0; i < config_.num_layers; i++)
    specs.push_back({config_.num_kv_heads, config_.head_dim, config_.window_for(i), -1});
  return specs;
}

Tensor DecoderModel::attention_block(const DecoderLayer& l, const Tensor& h,
                                     const StepTensors& step, PagedKv& kv) {
  const ModelConfig& c = config_;
  int64_t T = h.dim(0), Hq = c.num_heads, Hkv = c.num_kv_heads, Dh = c.head_dim;
  DType dt = backend_.act_dtype();
  Tensor qkv = backend_.alloc(dt, {T, (Hq + 2 * Hkv) * Dh});
  backend_.linear(qkv, h, l.qkv, l.qkv_bias);
  Tensor q = backend_.alloc(dt, {T, Hq, Dh});
  backend_.qkv_to_cache(q, qkv, kv, step, l.rope,
                        {l.q_norm, l.k_norm, c.rms_norm_eps, traits_.norm_weight_offset});
  Tensor attn = backend_.alloc(dt, {T, Hq, Dh});
  backend_.attention(attn, q, kv, step, l.attention);
  Tensor out = backend_.alloc(dt, {T, c.hidden_size});
  backend_.linear(out, attn.reshape({T, Hq * Dh}), l.o, l.o_bias);
  if (l.post_attn_norm.defined())
    backend_.rms_norm(out, out, l.post_attn_norm, c.rms_norm_eps, traits_.norm_weight_offset);
  return out;
}

Tensor DecoderModel::mlp_block(const DecoderLayer& l, const Tensor& h) {
  const ModelConfig& c = config_;
  int64_t T = h.dim(0), D = c.hidden_size;
  DType dt = backend_.act_dtype();
  Tensor out = backend_.alloc(dt, {T, D});
  if (l.router.defined()) {
    int64_t E = c.num_experts, K = c.num_experts_per_tok;
    Tensor router_logits = backend_.alloc(DType::F32, {T, E});  // routing decides on f32 scores
    backend_.linear(router_logits, h, l.router, {});
    Tensor weights = backend_.alloc(DType::F32, {T, K});
    Tensor ids = backend_.alloc(DType::I32, {T, K});
    backend_.topk_route(weights, ids, router_logits, int(K), traits_.moe_renormalize);
    backend_.moe_experts(out, h, weights, ids, l.experts_gate_up, l.experts_down, c.activation);
  } else {
    int64_t F = l.down.dim(1);
    Tensor gate_up = backend_.alloc(dt, {T, 2 * F});
    backend_.linear(gate_up, h, l.gate_up, l.gate_up_bias);
    Tensor act = backend_.alloc(dt, {T, F});
    backend_.gated_act(act, gate_up, c.activation);
    backend_.linear(out, act, l.down, l.down_bias);
  }
  if (l.post_ffn_norm.defined())
    backend_.rms_norm(out, out, l.post_ffn_norm, c.rms_norm_eps, traits_.norm_weight_offset);
  return out;
}

Tensor DecoderModel::logits(const Tensor& x, const StepTensors& step) {
  const ModelConfig& c = config_;
  int64_t S = step.sample_index.numel();
  DType dt = backend_.act_dtype();
  Tensor last = backend_.alloc(dt, {S, c.hidden_size});
  backend_.gather_rows(last, x, step.sample_index);
  backend_.rms_norm(last, last, final_norm_, c.rms_norm_eps, traits_.norm_weight_offset);
  if (traits_.logit_divisor != 1.f) backend_.scale(last, 1.f / traits_.logit_divisor);
  // Logits in f32 on every backend: bf16 would round away the gaps between near ties.
  Tensor out = backend_.alloc(DType::F32, {S, c.vocab_size});
  backend_.linear(out, last, lm_head_, {});
  if (c.final_logit_softcap > 0) backend_.softcap(out, c.final_logit_softcap);
  return out;
}

Tensor DecoderModel::forward(const StepTensors& step, std::span<PagedKv> kv) {
  const ModelConfig& c = config_;
  int64_t T = step.num_tokens;
  DType dt = backend_.act_dtype();
  Tensor x = backend_.alloc(dt, {T, c.hidden_size});
  float embed_scale = traits_.scale_embeddings ? float(std::sqrt(double(c.hidden_size))) : 1.f;
  backend_.embedding(x, embed_, step.tokens, embed_scale * traits_.embedding_multiplier);
  // x is the residual stream; h the normed input of the next block. Each block's output
  // joins x and the next norm runs in the same pass (add_rms_norm).
  const float eps = c.rms_norm_eps, offset = traits_.norm_weight_offset;
  auto scaled = [&](Tensor out) {
    if (traits_.residual_multiplier != 1.f) backend_.scale(out, traits_.residual_multiplier);
    return out;
  };
  Tensor h = backend_.alloc(dt, {T, c.hidden_size});
  backend_.rms_norm(h, x, layers_[0].attn_norm, eps, offset);
  for (size_t i = 0; i < layers_.size(); i++) {
    const DecoderLayer& l = layers_[i];
    Tensor attn = scaled(attention_block(l, h, step.for_layer(int(i)), kv[i]));
    backend_.add_rms_norm(h, x, attn, l.ffn_norm, eps, offset);
    Tensor mlp = scaled(mlp_block(l, h));
    if (i + 1 < layers_.size()) backend_.add_rms_norm(h, x, mlp, layers_[i + 1].attn_norm, eps, offset);
    else backend_.add(x, x, mlp);
  }
  return logits(x, step);
}

}  // namespace tandem
