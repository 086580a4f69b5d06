// Gemma 3n: the weight map, loading, and the KV specs (layers past the sharing point
// read their producer's storage). The forward is in gemma3n_forward.cpp and
// gemma3n_layer.cpp.
#include "model/arch/gemma3n.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/arch/archs.h"
#include "model/arch/gemma_tp.h"
#include "model/config.h"
#include "model/multimodal_names.h"
#include "model/rope.h"

namespace tandem::arch {
namespace {

// A multimodal file keeps these under its own prefix (rebase_text_map).
WeightMap gemma3n_weight_map() {
  const std::string M = "model.", L = "model.layers.{i}.", A = L + "self_attn.";
  return {
      {"embed", {M + "embed_tokens.weight"}},
      {"embed_per_layer", {M + "embed_tokens_per_layer.weight"}},
      {"per_layer_projection", {M + "per_layer_model_projection.weight"}},
      {"per_layer_norm", {M + "per_layer_projection_norm.weight"}},
      // "{i}" numbers the extra AltUp streams here, not layers.
      {"altup_in.{i}", {M + "altup_projections.{i}.weight"}},
      {"altup_out.{i}", {M + "altup_unembed_projections.{i}.weight"}},
      {"final_norm", {M + "norm.weight"}},
      {"lm_head", {"lm_head.weight"}, /*optional=*/true},
      {"layers.{i}.input_norm", {L + "input_layernorm.weight"}},
      {"layers.{i}.qkv", {A + "q_proj.weight", A + "k_proj.weight", A + "v_proj.weight"}},
      {"layers.{i}.qkv_bias", {A + "q_proj.bias", A + "k_proj.bias", A + "v_proj.bias"}, true},
      {"layers.{i}.q", {A + "q_proj.weight"}},
      {"layers.{i}.q_bias", {A + "q_proj.bias"}, true},
      {"layers.{i}.q_norm", {A + "q_norm.weight"}},
      {"layers.{i}.k_norm", {A + "k_norm.weight"}},
      {"layers.{i}.o", {A + "o_proj.weight"}},
      {"layers.{i}.o_bias", {A + "o_proj.bias"}, true},
      {"layers.{i}.post_attn_norm", {L + "post_attention_layernorm.weight"}},
      {"layers.{i}.pre_ffn_norm", {L + "pre_feedforward_layernorm.weight"}},
      {"layers.{i}.gate_up", {L + "mlp.gate_proj.weight", L + "mlp.up_proj.weight"}},
      {"layers.{i}.down", {L + "mlp.down_proj.weight"}},
      {"layers.{i}.post_ffn_norm", {L + "post_feedforward_layernorm.weight"}},
      {"layers.{i}.router_norm", {L + "altup.router_norm.weight"}},
      {"layers.{i}.router", {L + "altup.modality_router.weight"}},
      {"layers.{i}.predict_coefs", {L + "altup.prediction_coefs.weight"}},
      {"layers.{i}.correct_coefs", {L + "altup.correction_coefs.weight"}},
      {"layers.{i}.output_scale", {L + "altup.correct_output_scale"}},
      {"layers.{i}.laurel_left", {L + "laurel.linear_left.weight"}},
      {"layers.{i}.laurel_right", {L + "laurel.linear_right.weight"}},
      {"layers.{i}.laurel_norm", {L + "laurel.post_laurel_norm.weight"}},
      {"layers.{i}.pli_gate", {L + "per_layer_input_gate.weight"}},
      {"layers.{i}.pli_proj", {L + "per_layer_projection.weight"}},
      {"layers.{i}.pli_norm", {L + "post_per_layer_input_norm.weight"}},
  };
}

// The per-layer embedding table grown to the full vocabulary: Gemma3nModel maps ids at
// or past vocab_size_per_layer_input to id 0, so rows Vp..V-1 repeat row 0 (ops read
// contiguous rows by id). Built on the host in the file's dtype, uploaded once; under
// tensor parallelism only this rank's vocabulary rows of it (tp_vocab_rows of V).
Tensor padded_per_layer_table(const Checkpoint& checkpoint, int64_t V, int64_t Vp, int64_t width,
                              const TpShard& tp, Backend& be) {
  const std::string name = text_model_prefix(checkpoint) + "embed_tokens_per_layer.weight";
  Tensor file = checkpoint.get(name);
  if (!(file.shape == Shape{Vp, width}))
    fail("{}: weight '{}' has shape {} but the config implies {}", checkpoint.dir().string(), name,
         file.shape.str(), Shape{Vp, width}.str());
  Tensor host = Tensor::empty_host(file.dtype, {V, width});
  const size_t row_bytes = size_t(width) * dtype_size(file.dtype);
  char* dst = static_cast<char*>(host.data);
  std::memcpy(dst, file.data, size_t(Vp) * row_bytes);
  for (int64_t id = Vp; id < V; id++)
    std::memcpy(dst + size_t(id) * row_bytes, file.data, row_bytes);
  const WeightSlice::Range mine = tp_vocab_rows(V, tp).rows[0];
  return be.upload(host.slice_rows(mine.begin, mine.count), be.act_dtype());
}

}  // namespace

std::unique_ptr<Model> build_gemma3n(ModelConfig c, const Checkpoint& ck, Backend& be) {
  return std::make_unique<Gemma3nModel>(std::move(c), ck, be);
}

Gemma3nModel::Gemma3nModel(ModelConfig config, const Checkpoint& checkpoint, Backend& backend)
    : Model(std::move(config)), gemma_(Gemma3nConfig::parse(config_)), backend_(backend) {
  WeightLoader w(checkpoint, backend,
                 rebase_text_map(gemma3n_weight_map(), text_model_prefix(checkpoint), checkpoint),
                 0, &lora_);
  if (config_.tp.sharded()) {  // this rank's slices only (gemma_tp.h)
    try {
      check_gemma3n_tp(config_, gemma_, config_.tp.size);
    } catch (const Error& e) {
      fail("{}: {}", (checkpoint.dir() / "config.json").string(), e.what());
    }
    w.set_slicer(gemma3n_slicer(config_, gemma_, config_.tp), config_.tp.rank);
  }
  ones_head_ = ones(backend_, config_.head_dim);
  load_globals(w, checkpoint);
  layers_.resize(size_t(config_.num_layers));
  for (int i = 0; i < config_.num_layers; i++) load_layer(w, i);
  num_parameters_ = w.num_parameters();
  if (const int64_t Vp = gemma_.vocab_size_per_layer_input;
      Vp < config_.vocab_size) {  // the padded table bypassed w: count this rank's real rows
    const WeightSlice::Range mine = tp_vocab_rows(config_.vocab_size, config_.tp).rows[0];
    const int64_t real = std::max<int64_t>(0, std::min(Vp, mine.begin + mine.count) - mine.begin);
    num_parameters_ += real * config_.num_layers * gemma_.hidden_size_per_layer_input;
  }
}

// Gemma 3n's RMSNorms scale by w (no offset).
RmsNorm Gemma3nModel::load_norm(WeightLoader& w, const std::string& name, int layer,
                                int64_t width) {
  return {w.load(name, layer, {width}), float(config_.rms_norm_eps), 0.f};
}

void Gemma3nModel::load_globals(WeightLoader& w, const Checkpoint& checkpoint) {
  const ModelConfig& c = config_;
  const int64_t N = c.tp.size;  // the tables and the head hold a 1/N vocabulary slice
  const int64_t V = c.vocab_size, D = c.hidden_size, L = c.num_layers;
  const int64_t P = gemma_.hidden_size_per_layer_input, Vp = gemma_.vocab_size_per_layer_input;
  embed_ = w.load("embed", -1, {V / N, D});
  per_layer_.vocab = std::max(V, Vp);
  if (Vp >= V)
    per_layer_.embed = w.load("embed_per_layer", -1, {Vp / N, L * P});
  else
    per_layer_.embed = padded_per_layer_table(checkpoint, V, Vp, L * P, c.tp, backend_);
  per_layer_.projection = w.load_linear("per_layer_projection", -1, {L * P, D});
  per_layer_.norm = load_norm(w, "per_layer_norm", -1, P);
  per_layer_.num_layers = int(L);
  per_layer_.width = int(P);
  for (int n = 0; n + 1 < gemma_.altup_num_inputs; n++) {
    altup_in_.push_back(w.load_linear("altup_in.{i}", n, {D, D}));
    altup_out_.push_back(w.load_linear("altup_out.{i}", n, {D, D}));
  }
  head_.final_norm = load_norm(w, "final_norm", -1, D);
  // Tied: the embedding, even where the checkpoint also stores an lm_head.
  head_.head = gemma_.tie_word_embeddings ? Linear{.weight = embed_}
                                          : w.load_lm_head(embed_, {V / N, D}, false);
  head_.softcap = float(c.final_logit_softcap);
  if (c.tp.comm) {  // in a group: device-mapped vocabulary slices, the logits gathered
    embed_ = vocab_slice_table(backend_, embed_, &head_.head);
    per_layer_.embed = vocab_slice_table(backend_, per_layer_.embed, nullptr);
    per_layer_.tp = c.tp;
    head_.gather = c.tp.comm;
  }
}

void Gemma3nModel::load_attention(WeightLoader& w, Gemma3nLayer& l, int i) {
  const ModelConfig& c = config_;
  const TpHeads heads = tp_heads(c, c.tp);  // this rank's
  const int64_t D = c.hidden_size, Dh = c.head_dim, Hq = heads.q_heads, Hkv = heads.kv_heads;
  Attention& a = l.attention;
  a.reads_shared_kv = l.kv_source.has_value();
  if (!a.reads_shared_kv) {
    a.qkv = w.load_linear("layers.{i}.qkv", i, {(Hq + 2 * Hkv) * Dh, D});
    a.norm.k = w.load("layers.{i}.k_norm", i, {Dh});
    a.norm.v = ones_head_;  // v_norm has no weight
  } else {  // reads its producer's K/V: no k/v projections (a checkpoint may still hold them)
    a.qkv = w.load_linear("layers.{i}.q", i, {Hq * Dh, D});
  }
  a.norm.q = w.load("layers.{i}.q_norm", i, {Dh});
  a.norm.eps = float(c.rms_norm_eps);
  a.o = w.load_linear("layers.{i}.o", i, {D, Hq * Dh});
  a.rope = make_rope(c.rope_for(i), int(Dh), c.max_position_embeddings);
  a.params.scale = 1.f;  // q and k are RMS-normed; HF's scaling is 1.0
  a.params.softcap = 0.f;
  a.params.window = c.window_for(i);
  a.num_heads = int(Hq);
  a.num_kv_heads = int(Hkv);
  a.head_dim = int(Dh);
}

void Gemma3nModel::load_layer(WeightLoader& w, int i) {
  const ModelConfig& c = config_;
  Gemma3nLayer& l = layers_[size_t(i)];
  const int64_t D = c.hidden_size, F = c.intermediate_sizes[size_t(i)] / c.tp.size;
  const int64_t N = gemma_.altup_num_inputs, R = gemma_.laurel_rank;
  const int64_t P = gemma_.hidden_size_per_layer_input;
  l.kv_source = gemma_.kv_source[size_t(i)];
  l.input_norm = load_norm(w, "layers.{i}.input_norm", i, D);
  load_attention(w, l, i);
  l.post_attn_norm = load_norm(w, "layers.{i}.post_attn_norm", i, D);
  l.pre_ffn_norm = load_norm(w, "layers.{i}.pre_ffn_norm", i, D);
  l.mlp.gate_up = w.load_linear("layers.{i}.gate_up", i, {2 * F, D});
  l.mlp.down = w.load_linear("layers.{i}.down", i, {D, F});
  l.mlp.act = c.activation;
  l.post_ffn_norm = load_norm(w, "layers.{i}.post_ffn_norm", i, D);
  const float sparsity = gemma_.activation_sparsity[size_t(i)];
  l.sparse_gate = sparsity > 0.f;
  // HF evaluates Normal(0, 1).icdf on the f32 sparsity and keeps an f32 multiplier.
  if (l.sparse_gate) l.gate_std_multiplier = float(normal_icdf(double(sparsity)));

  l.router_norm = load_norm(w, "layers.{i}.router_norm", i, D);
  l.router = w.load_linear("layers.{i}.router", i, {N, D});
  l.predict_coefs = w.load_linear("layers.{i}.predict_coefs", i, {N * N, N});
  l.correct_coefs = w.load_linear("layers.{i}.correct_coefs", i, {N, N});
  l.correct_coefs.bias = ones(backend_, N);
  if (gemma_.altup_correct_scale) l.output_scale = w.load("layers.{i}.output_scale", i, {D});
  l.laurel_left = w.load_linear("layers.{i}.laurel_left", i, {R, D});
  l.laurel_right = w.load_linear("layers.{i}.laurel_right", i, {D, R});
  l.laurel_norm = load_norm(w, "layers.{i}.laurel_norm", i, D);
  l.per_layer.gate = w.load_linear("layers.{i}.pli_gate", i, {P, D});
  l.per_layer.proj = w.load_linear("layers.{i}.pli_proj", i, {D, P});
  l.per_layer.norm = load_norm(w, "layers.{i}.pli_norm", i, D);
  l.per_layer.act = c.activation;
}

std::vector<LayerKvSpec> Gemma3nModel::kv_specs() const {
  std::vector<LayerKvSpec> specs;
  for (int i = 0; i < config_.num_layers; i++)
    specs.push_back({tp_heads(config_, config_.tp).kv_heads, config_.head_dim,
                     config_.window_for(i), layers_[size_t(i)].kv_source});
  return specs;
}

}  // namespace tandem::arch
