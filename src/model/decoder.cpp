#include "model/decoder.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/pooled_hidden.h"
#include "model/rope.h"

namespace tandem {

WeightMap llama_style_weight_map() {
  const std::string L = "model.layers.{i}.";
  return {
      {"embed", {"model.embed_tokens.weight"}},
      {"final_norm", {"model.norm.weight"}},
      {"lm_head", {"lm_head.weight"}, /*optional=*/true},
      {"layers.{i}.attn_norm", {L + "input_layernorm.weight"}},
      {"layers.{i}.qkv",
       {L + "self_attn.q_proj.weight", L + "self_attn.k_proj.weight",
        L + "self_attn.v_proj.weight"}},
      {"layers.{i}.qkv_bias",
       {L + "self_attn.q_proj.bias", L + "self_attn.k_proj.bias", L + "self_attn.v_proj.bias"},
       true},
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
  WeightLoader w(checkpoint, backend, std::move(map), c.num_experts, &lora_);
  if (c.tp.sharded()) w.set_slicer(decoder_slicer(c, c.tp), c.tp.rank);
  int64_t V = c.vocab_size / c.tp.size, D = c.hidden_size;  // this rank's vocabulary rows
  embed_ = w.load("embed", -1, {V, D});
  head_.final_norm = load_norm(w, "final_norm", -1);
  head_.head = w.load_lm_head(embed_, {V, D}, c.tie_word_embeddings);
  // In a group (even of one rank, TANDEM_TP_EXECUTOR) the logits are gathered, and a 16-bit
  // lookup table gains a zero row, so ids are mapped on the device (vocab_slice_embedding); a
  // GGUF block table is used as loaded on CPU ranks and dequantized on GPU ranks.
  if (c.tp.comm) {
    embed_ = vocab_slice_table(backend, embed_, &head_.head);
    head_.gather = c.tp.comm;
  }
  head_.logit_divisor = traits_.logit_divisor;
  head_.softcap = float(c.final_logit_softcap);
  layers_.resize(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; i++) load_layer(w, i);
  num_parameters_ = w.num_parameters();
  experts_format_ = w.experts_format();
}

RmsNorm DecoderModel::load_norm(WeightLoader& w, const std::string& name, int layer,
                                bool must_exist) {
  return {w.load(name, layer, {config_.hidden_size}, must_exist), float(config_.rms_norm_eps),
          traits_.norm_weight_offset};
}

void DecoderModel::load_layer(WeightLoader& w, int i) {
  const ModelConfig& c = config_;
  DecoderLayer& l = layers_[size_t(i)];
  // This rank's heads and columns (model/tp_slices.h; the whole model at size 1).
  const TpHeads heads = tp_heads(c, c.tp);
  const int64_t N = c.tp.size;
  int64_t D = c.hidden_size, Dh = c.head_dim, F = c.intermediate_sizes[size_t(i)] / N;
  int64_t QKV = (heads.q_heads + 2 * heads.kv_heads) * Dh;
  l.attn_norm = load_norm(w, "layers.{i}.attn_norm", i);
  Attention& a = l.attention;
  a.qkv = w.load_linear("layers.{i}.qkv", i, {QKV, D});
  a.norm = {.q = w.load("layers.{i}.q_norm", i, {Dh}, false),
            .k = w.load("layers.{i}.k_norm", i, {Dh}, false),
            .eps = float(c.rms_norm_eps),
            .weight_offset = traits_.norm_weight_offset};
  a.o = w.load_linear("layers.{i}.o", i, {D, heads.q_heads * Dh});
  a.rope = make_rope(c.rope_for(i), c.head_dim, c.max_position_embeddings);
  a.params.scale = float(1.0 / std::sqrt(c.query_pre_attn_scalar.value_or(double(Dh))));
  a.params.softcap = c.attn_logit_softcap;
  a.params.window = c.window_for(i);
  a.params.media_bidirectional = c.media_bidirectional_at(i);
  a.num_heads = heads.q_heads;
  a.num_kv_heads = heads.kv_heads;
  a.head_dim = c.head_dim;
  l.post_attn_norm = load_norm(w, "layers.{i}.post_attn_norm", i, false);
  l.ffn_norm = load_norm(w, "layers.{i}.ffn_norm", i);
  l.post_ffn_norm = load_norm(w, "layers.{i}.post_ffn_norm", i, false);
  bool sparse =
      c.num_experts > 0 && (i + 1) % c.decoder_sparse_step == 0 &&
      std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), i) == c.mlp_only_layers.end();
  if (sparse) {
    int64_t E = c.num_experts, Fe = c.moe_intermediate_size / N;
    l.moe.router = w.load_linear("layers.{i}.router", i, {E, D});
    l.moe.experts_gate_up = w.load_experts("layers.{i}.experts_gate_up", i, {E, 2 * Fe, D});
    l.moe.experts_down = w.load_experts("layers.{i}.experts_down", i, {E, D, Fe});
    l.moe.top_k = c.num_experts_per_tok;
    l.moe.renormalize = traits_.moe_renormalize;
    l.moe.act = c.activation;
  } else {
    l.mlp.gate_up = w.load_linear("layers.{i}.gate_up", i, {2 * F, D});
    l.mlp.down = w.load_linear("layers.{i}.down", i, {D, F});
    l.mlp.act = c.activation;
  }
}

Tensor DecoderModel::embed(const StepTensors& step, float scale) {
  return tp_embedding(backend_, embed_, step.tokens, config_.vocab_size, config_.tp, scale);
}

std::vector<LayerKvSpec> DecoderModel::kv_specs() const {
  std::vector<LayerKvSpec> specs;
  for (int i = 0; i < config_.num_layers; i++)
    specs.push_back({tp_heads(config_, config_.tp).kv_heads, config_.head_dim,
                     config_.window_for(i), std::nullopt});
  return specs;
}

Tensor DecoderModel::attention_block(const DecoderLayer& l, const Tensor& h, const Fp8Input& hq,
                                     const StepTensors& step, PagedKv& kv) {
  Tensor out = attention(backend_, h, step, kv, l.attention, hq);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(out);  // the ranks' heads meet
  if (l.post_attn_norm.defined()) rms_norm_in_place(backend_, out, l.post_attn_norm);
  return out;
}

Tensor DecoderModel::mlp_block(const DecoderLayer& l, const Tensor& h, const Fp8Input& hq,
                               const StepTensors& step) {
  Tensor out = l.sparse() ? moe(backend_, h, h, l.moe) : gated_mlp(backend_, h, step, l.mlp, hq);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(out);  // the ranks' columns meet
  if (l.post_ffn_norm.defined()) rms_norm_in_place(backend_, out, l.post_ffn_norm);
  return out;
}

Tensor DecoderModel::forward(const StepTensors& step, std::span<PagedKv> kv) {
  const ModelConfig& c = config_;
  float embed_scale = traits_.scale_embeddings ? float(std::sqrt(double(c.hidden_size))) : 1.f;
  // x is the residual stream; h the normed input of the next block. Each block's output
  // joins x and the next norm runs in the same pass (add_rms_norm). Where the block's input
  // projection is FP8 (Linear::takes_fp8_input), the norm also writes h's e4m3 copy hq
  // (Backend::add_rms_norm_fp8), which the projection reads instead of quantizing h.
  Tensor x = embed(step, embed_scale * traits_.embedding_multiplier);
  write_media_rows(backend_, x, step);
  auto scaled = [&](Tensor out) {
    if (traits_.residual_multiplier != 1.f) backend_.scale(out, traits_.residual_multiplier);
    return out;
  };
  Fp8Input hq;
  auto add_norm = [&](Tensor& h, const Tensor& block_out, const RmsNorm& n, bool fp8) {
    if (fp8) {
      backend_.add_rms_norm_fp8(h, hq, x, block_out, n.weight, n.eps, n.weight_offset);
    } else {
      backend_.add_rms_norm(h, x, block_out, n.weight, n.eps, n.weight_offset);
      hq = Fp8Input{};
    }
  };
  const RmsNorm& first = layers_[0].attn_norm;
  Tensor h = backend_.alloc(x.dtype, x.shape);
  if (layers_[0].attention.qkv.takes_fp8_input())
    backend_.rms_norm_fp8(h, hq, x, first.weight, first.eps, first.weight_offset);
  else
    backend_.rms_norm(h, x, first.weight, first.eps, first.weight_offset);
  for (size_t i = 0; i < layers_.size(); i++) {
    const DecoderLayer& l = layers_[i];
    Tensor attn = scaled(attention_block(l, h, hq, step, kv[i]));
    add_norm(h, attn, l.ffn_norm, !l.sparse() && l.mlp.gate_up.takes_fp8_input());
    Tensor mlp = scaled(mlp_block(l, h, hq, step));
    if (i + 1 < layers_.size()) {
      const DecoderLayer& next = layers_[i + 1];
      add_norm(h, mlp, next.attn_norm, next.attention.qkv.takes_fp8_input());
    } else {
      backend_.add(x, x, mlp);
    }
  }
  return step_outputs(backend_, x, step, head_);  // logits, and pooled rows (pooled_hidden.h)
}

}  // namespace tandem
