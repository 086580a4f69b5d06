// Gemma 3n: the weight map, loading, and the KV specs (layers past the sharing point
// read their producer's storage). The forward is in gemma3n_forward.cpp and
// gemma3n_layer.cpp.
#include "model/arch/gemma3n.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/arch/archs.h"
#include "model/rope.h"

namespace tandem::arch {
namespace {

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

// A device tensor of `n` ones.
Tensor ones(Backend& be, int64_t n) {
  Tensor host = Tensor::empty_host(DType::F32, {n});
  std::fill(host.ptr<float>(), host.ptr<float>() + n, 1.f);
  return be.upload(host, be.act_dtype());
}

// The per-layer embedding table grown to the full vocabulary: Gemma3nModel maps ids at
// or past vocab_size_per_layer_input to id 0, so rows Vp..V-1 repeat row 0 (ops read
// contiguous rows by id). Built on the host in the file's dtype, uploaded once.
Tensor padded_per_layer_table(const Checkpoint& checkpoint, int64_t V, int64_t Vp, int64_t width,
                              Backend& be) {
  const std::string name = "model.embed_tokens_per_layer.weight";
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
  return be.upload(host, be.act_dtype());
}

}  // namespace

std::unique_ptr<Model> build_gemma3n(ModelConfig c, const Checkpoint& ck, Backend& be) {
  return std::make_unique<Gemma3nModel>(std::move(c), ck, be);
}

Gemma3nModel::Gemma3nModel(ModelConfig config, const Checkpoint& checkpoint, Backend& backend)
    : Model(std::move(config)), g_(Gemma3nConfig::parse(config_)), backend_(backend) {
  WeightLoader w(checkpoint, backend, gemma3n_weight_map(), 0);
  load_globals(w, checkpoint);
  layers_.resize(size_t(config_.num_layers));
  for (int i = 0; i < config_.num_layers; i++) load_layer(w, i);
  ones_head_ = ones(backend_, config_.head_dim);
  ones_streams_ = ones(backend_, g_.altup_num_inputs);
  num_parameters_ = w.num_parameters();
  if (g_.vocab_size_per_layer_input < config_.vocab_size)  // the padded table bypassed w
    num_parameters_ += int64_t(g_.vocab_size_per_layer_input) * config_.num_layers *
                       g_.hidden_size_per_layer_input;
}

void Gemma3nModel::load_globals(WeightLoader& w, const Checkpoint& checkpoint) {
  const ModelConfig& c = config_;
  const int64_t V = c.vocab_size, D = c.hidden_size, L = c.num_layers;
  const int64_t P = g_.hidden_size_per_layer_input, Vp = g_.vocab_size_per_layer_input;
  embed_ = w.load("embed", -1, {V, D});
  if (Vp >= V)
    embed_per_layer_ = w.load("embed_per_layer", -1, {Vp, L * P});
  else
    embed_per_layer_ = padded_per_layer_table(checkpoint, V, Vp, L * P, backend_);
  per_layer_projection_ = w.load("per_layer_projection", -1, {L * P, D});
  per_layer_norm_ = w.load("per_layer_norm", -1, {P});
  for (int n = 0; n + 1 < g_.altup_num_inputs; n++) {
    altup_in_.push_back(w.load("altup_in.{i}", n, {D, D}));
    altup_out_.push_back(w.load("altup_out.{i}", n, {D, D}));
  }
  final_norm_ = w.load("final_norm", -1, {D});
  // Tied: the embedding, even where the checkpoint also stores an lm_head.
  lm_head_ = g_.tie_word_embeddings ? embed_ : w.load_lm_head(embed_, {V, D}, false);
}

void Gemma3nModel::load_layer(WeightLoader& w, int i) {
  const ModelConfig& c = config_;
  Gemma3nLayer& l = layers_[size_t(i)];
  const int64_t D = c.hidden_size, Dh = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t F = c.intermediate_sizes[size_t(i)], N = g_.altup_num_inputs;
  const int64_t R = g_.laurel_rank, P = g_.hidden_size_per_layer_input;
  l.kv_source = g_.kv_source[size_t(i)];
  l.input_norm = w.load("layers.{i}.input_norm", i, {D});
  if (l.kv_source < 0) {
    l.qkv = w.load("layers.{i}.qkv", i, {(Hq + 2 * Hkv) * Dh, D});
    l.qkv_bias = w.load("layers.{i}.qkv_bias", i, {(Hq + 2 * Hkv) * Dh});
    l.k_norm = w.load("layers.{i}.k_norm", i, {Dh});
  } else {  // reads its producer's K/V: no k/v projections (a checkpoint may still hold them)
    l.qkv = w.load("layers.{i}.q", i, {Hq * Dh, D});
    l.qkv_bias = w.load("layers.{i}.q_bias", i, {Hq * Dh});
  }
  l.q_norm = w.load("layers.{i}.q_norm", i, {Dh});
  l.o = w.load("layers.{i}.o", i, {D, Hq * Dh});
  l.o_bias = w.load("layers.{i}.o_bias", i, {D});
  l.post_attn_norm = w.load("layers.{i}.post_attn_norm", i, {D});
  l.pre_ffn_norm = w.load("layers.{i}.pre_ffn_norm", i, {D});
  l.gate_up = w.load("layers.{i}.gate_up", i, {2 * F, D});
  l.down = w.load("layers.{i}.down", i, {D, F});
  l.post_ffn_norm = w.load("layers.{i}.post_ffn_norm", i, {D});
  const float sparsity = g_.activation_sparsity[size_t(i)];
  l.sparse_gate = sparsity > 0.f;
  // HF evaluates Normal(0, 1).icdf on the f32 sparsity and keeps an f32 multiplier.
  if (l.sparse_gate) l.gate_std_multiplier = float(normal_icdf(double(sparsity)));

  l.router_norm = w.load("layers.{i}.router_norm", i, {D});
  l.router = w.load("layers.{i}.router", i, {N, D});
  l.predict_coefs = w.load("layers.{i}.predict_coefs", i, {N * N, N});
  l.correct_coefs = w.load("layers.{i}.correct_coefs", i, {N, N});
  if (g_.altup_correct_scale) l.output_scale = w.load("layers.{i}.output_scale", i, {D});
  l.laurel_left = w.load("layers.{i}.laurel_left", i, {R, D});
  l.laurel_right = w.load("layers.{i}.laurel_right", i, {D, R});
  l.laurel_norm = w.load("layers.{i}.laurel_norm", i, {D});
  l.pli_gate = w.load("layers.{i}.pli_gate", i, {P, D});
  l.pli_proj = w.load("layers.{i}.pli_proj", i, {D, P});
  l.pli_norm = w.load("layers.{i}.pli_norm", i, {D});

  l.rope = make_rope(c.rope_for(i), int(Dh), c.max_position_embeddings);
  l.attention.scale = 1.f;  // q and k are RMS-normed; HF's scaling is 1.0
  l.attention.softcap = 0.f;
  l.attention.window = c.window_for(i);
}

std::vector<LayerKvSpec> Gemma3nModel::kv_specs() const {
  std::vector<LayerKvSpec> specs;
  for (int i = 0; i < config_.num_layers; i++)
    specs.push_back({config_.num_kv_heads, config_.head_dim, config_.window_for(i),
                     layers_[size_t(i)].kv_source});
  return specs;
}

}  // namespace tandem::arch
