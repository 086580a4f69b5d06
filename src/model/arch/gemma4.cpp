// Gemma 4 loading: the weight map, per-layer shapes from Gemma4Config, the builder.
#include "model/arch/gemma4.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/quant_scheme.h"
#include "model/arch/archs.h"
#include "model/arch/gemma_tp.h"
#include "model/config.h"
#include "model/multimodal_names.h"
#include "model/rope.h"

namespace tandem::arch {
namespace {

WeightMap gemma4_weight_map(const std::string& P) {
  const std::string L = P + "layers.{i}.";
  const std::string A = L + "self_attn.";
  return {
      {"embed", {P + "embed_tokens.weight"}},
      {"embed_per_layer", {P + "embed_tokens_per_layer.weight"}},
      {"per_layer_projection", {P + "per_layer_model_projection.weight"}},
      {"per_layer_norm", {P + "per_layer_projection_norm.weight"}},
      {"final_norm", {P + "norm.weight"}},
      {"lm_head", {"lm_head.weight"}, /*optional=*/true},
      {"layers.{i}.input_norm", {L + "input_layernorm.weight"}},
      {"layers.{i}.qkv", {A + "q_proj.weight", A + "k_proj.weight", A + "v_proj.weight"}},
      {"layers.{i}.qk", {A + "q_proj.weight", A + "k_proj.weight"}},
      {"layers.{i}.q", {A + "q_proj.weight"}},
      {"layers.{i}.q_norm", {A + "q_norm.weight"}},
      {"layers.{i}.k_norm", {A + "k_norm.weight"}},
      {"layers.{i}.o", {A + "o_proj.weight"}},
      {"layers.{i}.post_attn_norm", {L + "post_attention_layernorm.weight"}},
      {"layers.{i}.pre_ffn_norm", {L + "pre_feedforward_layernorm.weight"}},
      {"layers.{i}.gate_up", {L + "mlp.gate_proj.weight", L + "mlp.up_proj.weight"}},
      {"layers.{i}.down", {L + "mlp.down_proj.weight"}},
      {"layers.{i}.post_ffn_norm", {L + "post_feedforward_layernorm.weight"}},
      {"layers.{i}.post_ffn_norm_1", {L + "post_feedforward_layernorm_1.weight"}},
      {"layers.{i}.pre_ffn_norm_2", {L + "pre_feedforward_layernorm_2.weight"}},
      {"layers.{i}.post_ffn_norm_2", {L + "post_feedforward_layernorm_2.weight"}},
      {"layers.{i}.router_scale", {L + "router.scale"}},
      {"layers.{i}.router", {L + "router.proj.weight"}},
      {"layers.{i}.experts_gate_up", {L + "experts.gate_up_proj"}},
      {"layers.{i}.pli_gate", {L + "per_layer_input_gate.weight"}},
      {"layers.{i}.pli_proj", {L + "per_layer_projection.weight"}},
      {"layers.{i}.pli_norm", {L + "post_per_layer_input_norm.weight"}},
  };
}

// A checkpoint tensor as a new host f32 tensor, its shape checked.
Tensor host_f32(const Checkpoint& ck, const std::string& name, Shape expected) {
  Tensor t = ck.get(name);
  if (!(t.shape == expected) && !(t.numel() == expected.numel() && expected.numel() == 1))
    fail("{}: weight '{}' has shape {} but the config implies {}", ck.dir().string(), name,
         t.shape.str(), expected.str());
  Tensor out = Tensor::empty_host(DType::F32, expected);
  convert_to_f32(t.data, t.dtype, out.ptr<float>(), size_t(t.numel()));
  return out;
}

}  // namespace

Gemma4Model::Gemma4Model(ModelConfig config, const Checkpoint& checkpoint, Backend& backend)
    : Model(std::move(config)), backend_(backend) {
  gemma_ = parse_gemma4_config(config_);
  // Text-only checkpoints name tensors "model.…"; Gemma4ForConditionalGeneration's files
  // hold the same text model under "model.language_model.…" (multimodal_names.h).
  prefix_ = text_model_prefix(checkpoint);
  if (auto pad = config_.raw().find("pad_token_id");
      pad != config_.raw().end() && pad->is_number_integer())
    pad_token_id_ = pad->get<int32_t>();
  if (pad_token_id_ < 0 || pad_token_id_ >= config_.vocab_size)
    fail("{}: pad_token_id {} is outside the vocabulary (0..{})", checkpoint.dir().string(),
         pad_token_id_, config_.vocab_size - 1);
  WeightLoader w(checkpoint, backend,
                 rebase_text_map(gemma4_weight_map("model."), prefix_, checkpoint),
                 gemma_.num_experts, &lora_);
  if (config_.tp.sharded()) {  // this rank's slices only (gemma_tp.h)
    try {
      check_gemma4_tp(config_, gemma_, config_.tp.size);
    } catch (const Error& e) {
      fail("{}: {}", (checkpoint.dir() / "config.json").string(), e.what());
    }
    w.set_slicer(gemma4_slicer(config_, gemma_, config_.tp), config_.tp.rank);
  }
  load_globals(w);
  layers_.resize(size_t(config_.num_layers));
  for (int i = 0; i < config_.num_layers; i++) load_layer(w, checkpoint, i);
  num_parameters_ += w.num_parameters();
}

// Gemma 4's RMSNorms scale by w (no offset).
RmsNorm Gemma4Model::load_norm(WeightLoader& w, const std::string& name, int layer) {
  return {w.load(name, layer, {config_.hidden_size}), float(config_.rms_norm_eps), 0.f};
}

void Gemma4Model::load_globals(WeightLoader& w) {
  const ModelConfig& c = config_;
  const int64_t N = c.tp.size;  // the tables and the head hold a 1/N vocabulary slice
  int64_t V = c.vocab_size / N, D = c.hidden_size, L = c.num_layers;
  embed_ = w.load("embed", -1, {V, D});
  head_.final_norm = load_norm(w, "final_norm", -1);
  head_.head = w.load_lm_head(embed_, {V, D}, c.tie_word_embeddings);
  head_.softcap = float(c.final_logit_softcap);
  if (c.tp.comm) {  // in a group the logits are gathered (as DecoderModel's)
    embed_ = vocab_slice_table(backend_, embed_, &head_.head);
    head_.gather = c.tp.comm;
  }
  if (int64_t P = gemma_.hidden_size_per_layer_input; P > 0) {
    per_layer_.vocab = gemma_.vocab_size_per_layer_input;
    per_layer_.embed = w.load("embed_per_layer", -1, {per_layer_.vocab / N, L * P});
    if (c.tp.comm) per_layer_.embed = vocab_slice_table(backend_, per_layer_.embed, nullptr);
    per_layer_.tp = c.tp;
    per_layer_.projection = w.load_linear("per_layer_projection", -1, {L * P, D});
    per_layer_.norm = {w.load("per_layer_norm", -1, {P}), float(c.rms_norm_eps), 0.f};
    per_layer_.num_layers = int(L);
    per_layer_.width = int(P);
  }
}

void Gemma4Model::load_attention(WeightLoader& w, Gemma4Layer& l, int i) {
  const ModelConfig& c = config_;
  const Gemma4LayerSpec& s = l.spec;
  const TpHeads heads = tp_heads(s.num_heads, s.num_kv_heads, c.tp);  // this rank's
  int64_t D = c.hidden_size, Dh = s.head_dim, Hq = heads.q_heads, Hkv = heads.kv_heads;
  Attention& a = l.attention;
  a.norm.q = w.load("layers.{i}.q_norm", i, {Dh});
  a.norm.eps = float(c.rms_norm_eps);
  a.reads_shared_kv = s.kv_source.has_value();
  if (a.reads_shared_kv) {
    a.qkv = w.load_linear("layers.{i}.q", i, {Hq * Dh, D});
  } else {
    a.qkv = s.k_eq_v ? w.load_linear("layers.{i}.qk", i, {(Hq + Hkv) * Dh, D})
                     : w.load_linear("layers.{i}.qkv", i, {(Hq + 2 * Hkv) * Dh, D});
    a.norm.k = w.load("layers.{i}.k_norm", i, {Dh});
    a.norm.v = ones(backend_, Dh);  // v_norm has no weight
  }
  a.o = w.load_linear("layers.{i}.o", i, {D, Hq * Dh});
  // Gemma 4's default RoPE rotates the whole head whatever partial_rotary_factor says.
  RopeConfig rope = c.rope_for(i);
  if (rope.type == "default") rope.partial_rotary_factor = 1.0;
  a.rope = make_rope(rope, int(Dh), c.max_position_embeddings);
  a.params.scale = 1.f;  // q and k are RMS-normed
  a.params.window = s.window;
  a.params.media_bidirectional = c.media_bidirectional_at(i);
  a.num_heads = int(Hq);
  a.num_kv_heads = int(Hkv);
  a.head_dim = int(Dh);
}

void Gemma4Model::load_layer(WeightLoader& w, const Checkpoint& checkpoint, int i) {
  const ModelConfig& c = config_;
  Gemma4Layer& l = layers_[size_t(i)];
  l.spec = gemma_.layers[size_t(i)];
  int64_t D = c.hidden_size, F = l.spec.intermediate_size / c.tp.size;
  l.input_norm = load_norm(w, "layers.{i}.input_norm", i);
  load_attention(w, l, i);
  l.post_attn_norm = load_norm(w, "layers.{i}.post_attn_norm", i);
  l.pre_ffn_norm = load_norm(w, "layers.{i}.pre_ffn_norm", i);
  l.mlp.gate_up = w.load_linear("layers.{i}.gate_up", i, {2 * F, D});
  l.mlp.down = w.load_linear("layers.{i}.down", i, {D, F});
  l.mlp.act = c.activation;
  l.post_ffn_norm = load_norm(w, "layers.{i}.post_ffn_norm", i);
  if (gemma_.enable_moe_block) load_moe(w, checkpoint, l, i);
  if (int64_t P = gemma_.hidden_size_per_layer_input; P > 0) {
    l.per_layer.gate = w.load_linear("layers.{i}.pli_gate", i, {P, D});
    l.per_layer.proj = w.load_linear("layers.{i}.pli_proj", i, {D, P});
    l.per_layer.norm = load_norm(w, "layers.{i}.pli_norm", i);
    l.per_layer.act = c.activation;
  }
  std::string scalar = expand_name(prefix_ + "layers.{i}.layer_scalar", i);
  if (checkpoint.has(scalar)) {  // a buffer of ones unless trained otherwise
    l.layer_scalar = host_f32(checkpoint, scalar, {1}).ptr<float>()[0];
    num_parameters_ += c.tp.rank == 0;  // held whole: counted once
  }
}

// The router, the stacked experts, and the three extra norms. per_expert_scale multiplies
// an expert's routing weight, so it is folded into that expert's down projection (linear).
// Under tensor parallelism every expert is cut like the dense MLP (gemma_tp.h). The experts
// load as FP8 (WeightLoader::quantizes_stacked_experts) where the checkpoint holds them in
// e4m3 (`tandem quantize`: stacked_experts_name) or under --quantization fp8 on a backend
// with FP8 experts: quantized per output channel, each rank its own slice and down after
// the fold — or, read in e4m3, the fold applied to down's scales, which is the same.
void Gemma4Model::load_moe(WeightLoader& w, const Checkpoint& checkpoint, Gemma4Layer& l, int i) {
  int64_t D = config_.hidden_size, E = gemma_.num_experts;
  l.post_ffn_norm_1 = load_norm(w, "layers.{i}.post_ffn_norm_1", i);
  l.pre_ffn_norm_2 = load_norm(w, "layers.{i}.pre_ffn_norm_2", i);
  l.post_ffn_norm_2 = load_norm(w, "layers.{i}.post_ffn_norm_2", i);
  l.router_norm = load_norm(w, "layers.{i}.router_scale", i);
  l.moe.router = w.load_linear("layers.{i}.router", i, {E, D});
  const std::string L = expand_name(prefix_ + "layers.{i}.", i);
  const std::string gate_up_name = L + "experts.gate_up_proj";
  const bool fp8 = w.quantizes_stacked_experts(gate_up_name, checkpoint.dtype(gate_up_name));
  experts_format_ = w.experts_format();
  l.moe.experts_gate_up = load_experts_gate_up(w, checkpoint, L, i, fp8);
  l.moe.top_k = gemma_.top_k_experts;
  l.moe.renormalize = true;
  l.moe.act = config_.activation;
  l.moe.experts_down = load_experts_down(w, checkpoint, L, fp8);
}

// experts.gate_up_proj [E, 2·Fe, D] (this rank's [E, 2·Fe/N, D]), and in e4m3 its scales
// [E, 2·Fe, 1] cut alike.
Linear Gemma4Model::load_experts_gate_up(WeightLoader& w, const Checkpoint& checkpoint,
                                         const std::string& L, int i, bool fp8) {
  const TpShard& tp = config_.tp;
  const int64_t D = config_.hidden_size, E = gemma_.num_experts, Fe = gemma_.moe_intermediate_size;
  const std::string name = L + "experts.gate_up_proj";
  if (!tp.sharded() && !fp8)
    return Linear{.weight = w.load("layers.{i}.experts_gate_up", i, {E, 2 * Fe, D})};
  // One stacked tensor: cut per expert here, not by the slicer.
  Tensor gate_up = checkpoint.get(name);
  if (!(gate_up.shape == Shape{E, 2 * Fe, D}))
    fail("{}: weight '{}' has shape {} but the config implies {}", checkpoint.dir().string(), name,
         gate_up.shape.str(), Shape{E, 2 * Fe, D}.str());
  if (tp.sharded()) gate_up = gemma4_experts_gate_up_slice(gate_up, tp);  // [E, 2·Fe/N, D]
  num_parameters_ += gate_up.numel();
  if (gate_up.dtype == DType::F8E4M3) {
    Tensor scale = host_f32(checkpoint, stacked_scale_name(name), {E, 2 * Fe, 1});
    check_fp8_scales(checkpoint.dir().string(), stacked_scale_name(name), scale.ptr<float>(),
                     scale.numel());
    if (tp.sharded()) scale = gemma4_experts_gate_up_slice(scale, tp);  // [E, 2·Fe/N, 1]
    return w.stacked_fp8_experts(gate_up, scale.reshape({E, gate_up.dim(1)}));
  }
  if (fp8) return w.quantize_stacked_experts(gate_up);
  return Linear{.weight = backend_.upload(gate_up, backend_.weight_dtype(gate_up.dtype))};
}

// experts.down_proj [E, D, Fe] (this rank's columns [E, D, Fe/N]) with the router's
// per_expert_scale [E] folded in: into the weights, or in e4m3 into the scales [E, D, 1].
Linear Gemma4Model::load_experts_down(WeightLoader& w, const Checkpoint& checkpoint,
                                      const std::string& L, bool fp8) {
  const TpShard& tp = config_.tp;
  const int64_t D = config_.hidden_size, E = gemma_.num_experts, Fe = gemma_.moe_intermediate_size;
  const std::string name = L + "experts.down_proj";
  const Tensor scale = host_f32(checkpoint, L + "router.per_expert_scale", {E});
  num_parameters_ += tp.rank == 0 ? scale.numel() : 0;
  const bool stored_fp8 = checkpoint.dtype(name) == DType::F8E4M3;
  // In e4m3 the weights stay as stored and each expert's D row scales take the factor.
  Tensor down = stored_fp8 ? checkpoint.get(name) : host_f32(checkpoint, name, {E, D, Fe});
  if (!(down.shape == Shape{E, D, Fe}))
    fail("{}: weight '{}' has shape {} but the config implies {}", checkpoint.dir().string(), name,
         down.shape.str(), Shape{E, D, Fe}.str());
  if (tp.sharded()) down = gemma4_experts_down_slice(down, tp);  // [E, D, Fe/N]
  num_parameters_ += down.numel();
  Tensor folded = stored_fp8 ? host_f32(checkpoint, stacked_scale_name(name), {E, D, 1}) : down;
  if (stored_fp8)
    check_fp8_scales(checkpoint.dir().string(), stacked_scale_name(name), folded.ptr<float>(),
                     folded.numel());
  float* d = folded.ptr<float>();
  const int64_t per_expert = folded.numel() / E;
  for (int64_t e = 0; e < E; e++)
    for (int64_t j = 0; j < per_expert; j++) d[e * per_expert + j] *= scale.ptr<float>()[e];
  if (stored_fp8) return w.stacked_fp8_experts(down, folded.reshape({E, D}));
  if (fp8) return w.quantize_stacked_experts(down);
  return Linear{.weight = backend_.upload(down, backend_.act_dtype())};
}

std::vector<LayerKvSpec> Gemma4Model::kv_specs() const {
  std::vector<LayerKvSpec> specs;
  for (const Gemma4LayerSpec& s : gemma_.layers)  // this rank's KV heads
    specs.push_back({tp_heads(s.num_heads, s.num_kv_heads, config_.tp).kv_heads, s.head_dim,
                     s.window, s.kv_source});
  return specs;
}

std::unique_ptr<Model> build_gemma4(ModelConfig c, const Checkpoint& ck, Backend& be) {
  apply_gemma4_defaults(c);
  return std::make_unique<Gemma4Model>(std::move(c), ck, be);
}

}  // namespace tandem::arch
