// One Gemma 3n decoder layer, in HF's order (Gemma3nTextDecoderLayer.forward):
//   predictions = AltUp.predict(streams); active = predictions[a]
//   x = input_norm(active)
//   h = (active + post_attn_norm(attention(x)) + laurel(x)) / √2
//   activated = h + post_ffn_norm(mlp(pre_ffn_norm(h)))
//   corrected = AltUp.correct(predictions, activated)
//   corrected[1:] += per-layer input gated by corrected[a]
#include <cmath>

#include "model/arch/gemma3n.h"

namespace tandem::arch {

void Gemma3nModel::layer_forward(const Gemma3nLayer& l, Tensor& streams, const Tensor& pli,
                                 const StepTensors& step, std::span<PagedKv> kv, int index) {
  const float eps = config_.rms_norm_eps;
  Tensor predictions = altup_predict(l, streams);
  Tensor active = stream(predictions, g_.altup_active_idx);
  Tensor x = norm(active, l.input_norm);
  Tensor laurel_out = laurel(l, x);
  Tensor h = attention_block(l, x, step, kv, index);
  backend_.rms_norm(h, h, l.post_attn_norm, eps, 0.f);
  backend_.add(h, active, h);
  backend_.add(h, h, laurel_out);
  backend_.scale(h, float(1.0 / std::sqrt(2.0)));
  Tensor activated = mlp_block(l, norm(h, l.pre_ffn_norm));
  backend_.rms_norm(activated, activated, l.post_ffn_norm, eps, 0.f);
  backend_.add(activated, h, activated);
  altup_correct(l, predictions, activated);
  add_per_layer_input(l, predictions, pli);
  streams = predictions;
}

// tanh(router(router_norm(x) / D)): the per-token AltUp coefficients' input.
//   x [T, D] → [T, N]
Tensor Gemma3nModel::router_modalities(const Gemma3nLayer& l, const Tensor& x) {
  Tensor h = norm(x, l.router_norm);
  backend_.scale(h, float(1.0 / double(config_.hidden_size)));
  Tensor m = linear(h, l.router);
  backend_.softcap(m, 1.f);  // 1 · tanh(m / 1) = tanh(m)
  return m;
}

// predictions[m] = streams[m] + Σ_s C[m, s] · streams[s], C = predict_coefs(modalities)
// reshaped [N, N] per token.   streams [N, T, D] → [N, T, D]
Tensor Gemma3nModel::altup_predict(const Gemma3nLayer& l, const Tensor& streams) {
  Tensor modalities = router_modalities(l, stream(streams, g_.altup_active_idx));
  Tensor coefs = linear(modalities, l.predict_coefs);  // [T, N·N]
  Tensor predictions = backend_.alloc(backend_.act_dtype(), streams.shape);
  backend_.copy(predictions, streams);
  backend_.mix_streams(predictions, streams, coefs);
  return predictions;
}

// predictions[m] += (correct_coefs(modalities)[m] + 1) · (activated − predictions[a]),
// in place.   predictions [N, T, D], activated [T, D]
void Gemma3nModel::altup_correct(const Gemma3nLayer& l, Tensor& predictions,
                                 const Tensor& activated) {
  Tensor modalities = router_modalities(l, activated);
  Tensor coefs = linear(modalities, l.correct_coefs, ones_streams_);  // [T, N]
  Tensor innovation = backend_.alloc(backend_.act_dtype(), activated.shape);
  backend_.sub(innovation, activated, stream(predictions, g_.altup_active_idx));
  backend_.mix_streams(predictions, innovation.reshape({1, activated.dim(0), activated.dim(1)}),
                       coefs);
}

// LAuReL: x + laurel_norm(right(left(x))).   x [T, D]
Tensor Gemma3nModel::laurel(const Gemma3nLayer& l, const Tensor& x) {
  Tensor out = linear(linear(x, l.laurel_left), l.laurel_right);
  backend_.rms_norm(out, out, l.laurel_norm, config_.rms_norm_eps, 0.f);
  backend_.add(out, x, out);
  return out;
}

// Per-head q/k norms (weighted) and v norm (unweighted), RoPE on q and k; a layer past
// the sharing point computes only q and attends over its producer's cache.
//   x [T, D] → [T, D]
Tensor Gemma3nModel::attention_block(const Gemma3nLayer& l, const Tensor& x,
                                     const StepTensors& step, std::span<PagedKv> kv, int index) {
  const ModelConfig& c = config_;
  const int64_t T = x.dim(0), Hq = c.num_heads, Hkv = c.num_kv_heads, Dh = c.head_dim;
  const DType dt = backend_.act_dtype();
  const float eps = c.rms_norm_eps;
  Tensor projected = linear(x, l.qkv, l.qkv_bias);
  Tensor q = projected;
  if (l.kv_source < 0) {
    q = backend_.alloc(dt, {T, Hq * Dh});
    Tensor k = backend_.alloc(dt, {T, Hkv * Dh}), v = backend_.alloc(dt, {T, Hkv * Dh});
    backend_.split_columns(projected, {&q, &k, &v});
    k = k.reshape({T, Hkv, Dh});
    v = v.reshape({T, Hkv, Dh});
    Tensor k_rows = k.reshape({T * Hkv, Dh}), v_rows = v.reshape({T * Hkv, Dh});
    backend_.rms_norm(k_rows, k_rows, l.k_norm, eps, 0.f);
    backend_.rms_norm(v_rows, v_rows, ones_head_, eps, 0.f);
    backend_.rope(k, step, l.rope);
    backend_.write_kv(kv[size_t(index)], k, v, step);
  }
  Tensor q_rows = q.reshape({T * Hq, Dh});
  backend_.rms_norm(q_rows, q_rows, l.q_norm, eps, 0.f);
  q = q.reshape({T, Hq, Dh});
  backend_.rope(q, step, l.rope);
  const PagedKv& cache = kv[size_t(l.kv_source < 0 ? index : l.kv_source)];
  Tensor attn = backend_.alloc(dt, {T, Hq, Dh});
  backend_.attention(attn, q, cache, step, l.attention);
  return linear(attn.reshape({T, Hq * Dh}), l.o, l.o_bias);
}

// down(act(gate) · up); on sparse layers the gate first keeps only what lies above
// mean + σ · Φ⁻¹(sparsity) per token.   x [T, D] → [T, D]
Tensor Gemma3nModel::mlp_block(const Gemma3nLayer& l, const Tensor& x) {
  const int64_t T = x.dim(0), F = l.down.dim(1);
  const DType dt = backend_.act_dtype();
  Tensor gate_up = linear(x, l.gate_up);  // [T, 2F]
  Tensor act = backend_.alloc(dt, {T, F});
  if (!l.sparse_gate) {
    backend_.gated_act(act, gate_up, config_.activation);
  } else {
    Tensor gate = backend_.alloc(dt, {T, F}), up = backend_.alloc(dt, {T, F});
    backend_.split_columns(gate_up, {&gate, &up});
    backend_.gaussian_topk(gate, l.gate_std_multiplier);
    backend_.act_mul(act, gate, up, config_.activation);
  }
  return linear(act, l.down);
}

// corrected[n] += pli_norm(pli_proj(act(pli_gate(corrected[a] · output_scale)) · pli))
// for n = 1 .. N − 1 (HF's corrected_predictions[1:], whatever the active index).
//   corrected [N, T, D], pli [T, P]
void Gemma3nModel::add_per_layer_input(const Gemma3nLayer& l, Tensor& corrected,
                                       const Tensor& pli) {
  Tensor first = backend_.alloc(backend_.act_dtype(), {pli.dim(0), config_.hidden_size});
  backend_.copy(first, stream(corrected, g_.altup_active_idx));
  if (g_.altup_correct_scale) backend_.mul(first, first, l.output_scale);
  Tensor gate = linear(first, l.pli_gate);  // [T, P]
  Tensor gated = backend_.alloc(backend_.act_dtype(), gate.shape);
  backend_.act_mul(gated, gate, pli, config_.activation);
  Tensor update = linear(gated, l.pli_proj);  // [T, D]
  backend_.rms_norm(update, update, l.pli_norm, config_.rms_norm_eps, 0.f);
  for (int n = 1; n < g_.altup_num_inputs; n++) {
    Tensor s = stream(corrected, n);
    backend_.add(s, s, update);
  }
}

}  // namespace tandem::arch
