// Gemma 4 forward: embeddings and per-layer inputs, the decoder layer (attention with
// optional KV sharing, dense MLP, optional MoE block, per-layer input branch), logits.
// Every op follows modeling_gemma4.py in order, so fp32 results match it to round-off.
#include <cmath>

#include "core/error.h"
#include "model/arch/gemma4.h"

namespace tandem::arch {

Tensor Gemma4Model::norm(const Tensor& x, const Tensor& w) {
  Tensor out = backend_.alloc(backend_.act_dtype(), x.shape);
  backend_.rms_norm(out, x, w, config_.rms_norm_eps, 0.f);
  return out;
}

Tensor Gemma4Model::linear(const Tensor& x, const Tensor& w) {
  Tensor out = backend_.alloc(backend_.act_dtype(), {x.rows(), w.dim(0)});
  backend_.linear(out, x, w, {});
  return out;
}

// HF project_per_layer_inputs: (rms_norm(x0 · Wᵀ / √D) + embed_per_layer[id] · √P) / √2,
// per layer of P values; returned layer-major so that layer i's rows are contiguous.
//   x0 [T, D] → [L, T, P]
Tensor Gemma4Model::per_layer_inputs(const Tensor& x0, const StepTensors& step) {
  const int64_t T = x0.dim(0), L = config_.num_layers, P = g_.hidden_size_per_layer_input;
  DType dt = backend_.act_dtype();
  Tensor projected = linear(x0, per_layer_projection_);  // [T, L·P]
  backend_.scale(projected, float(std::pow(double(config_.hidden_size), -0.5)));
  Tensor per_layer = projected.reshape({T * L, P});
  backend_.rms_norm(per_layer, per_layer, per_layer_norm_, config_.rms_norm_eps, 0.f);
  Tensor embedded = backend_.alloc(dt, {T, L * P});
  backend_.embedding(embedded, embed_per_layer_, step.tokens, float(std::sqrt(double(P))));
  backend_.add(projected, projected, embedded);
  backend_.scale(projected, float(std::pow(2.0, -0.5)));
  Tensor out = backend_.alloc(dt, {L, T, P});
  backend_.swap_leading_dims(out, projected.reshape({T, L, P}));
  return out;
}

// q (and k, v unless this layer reads another layer's KV) → per-head RMSNorm → RoPE →
// unscaled attention over the paged cache.   h [T, D] → [T, D]
Tensor Gemma4Model::attention_block(const Gemma4Layer& l, const Tensor& h, const StepTensors& step,
                                    std::span<PagedKv> kv, int index) {
  const Gemma4LayerSpec& s = l.spec;
  const int64_t T = h.dim(0), Hq = s.num_heads, Hkv = s.num_kv_heads, Dh = s.head_dim;
  const float eps = config_.rms_norm_eps;
  DType dt = backend_.act_dtype();
  Tensor q;
  PagedKv* cache = &kv[size_t(index)];
  if (s.kv_source >= 0) {
    q = linear(h, l.qkv);
    cache = &kv[size_t(s.kv_source)];  // written earlier in this step by the source layer
  } else {
    Tensor proj = linear(h, l.qkv);
    q = backend_.alloc(dt, {T, Hq * Dh});
    Tensor k = backend_.alloc(dt, {T, Hkv * Dh});
    Tensor v = backend_.alloc(dt, {T, Hkv * Dh});
    if (s.k_eq_v) {
      backend_.split_columns(proj, {&q, &k});
      backend_.copy(v, k);  // V is the raw key projection (before k_norm and RoPE)
    } else {
      backend_.split_columns(proj, {&q, &k, &v});
    }
    Tensor kr = k.reshape({T * Hkv, Dh}), vr = v.reshape({T * Hkv, Dh});
    backend_.rms_norm(kr, kr, l.k_norm, eps, 0.f);
    backend_.rms_norm(vr, vr, l.unit_norm, eps, 0.f);
    k = k.reshape({T, Hkv, Dh});
    backend_.rope(k, step, l.rope);
    backend_.write_kv(*cache, k, v.reshape({T, Hkv, Dh}), step);
  }
  Tensor qr = q.reshape({T * Hq, Dh});
  backend_.rms_norm(qr, qr, l.q_norm, eps, 0.f);
  q = q.reshape({T, Hq, Dh});
  backend_.rope(q, step, l.rope);
  Tensor attn = backend_.alloc(dt, {T, Hq, Dh});
  backend_.attention(attn, q, *cache, step, l.attention);
  return linear(attn.reshape({T, Hq * Dh}), l.o);
}

// down(act(gate · h) * (up · h)).   h [T, D] → [T, D]
Tensor Gemma4Model::mlp_block(const Gemma4Layer& l, const Tensor& h) {
  Tensor gate_up = linear(h, l.gate_up);  // [T, 2F]
  Tensor act = backend_.alloc(backend_.act_dtype(), {h.dim(0), l.down.dim(1)});
  backend_.gated_act(act, gate_up, config_.activation);
  return linear(act, l.down);
}

// HF Gemma4TextRouter + Gemma4TextExperts, from the residual before the MLP's norm:
// route on rms_norm(x) · scale / √D (softmax, top-k, renormalized, × per_expert_scale,
// folded into the experts), run the experts on pre_ffn_norm_2(x), then post_ffn_norm_2.
//   residual [T, D] → [T, D]
Tensor Gemma4Model::moe_block(const Gemma4Layer& l, const Tensor& residual) {
  const int64_t T = residual.dim(0), K = g_.top_k_experts;
  Tensor routed = norm(residual, l.router_scale);
  backend_.scale(routed, float(std::pow(double(config_.hidden_size), -0.5)));
  Tensor router_logits = linear(routed, l.router);  // [T, E]
  Tensor weights = backend_.alloc(DType::F32, {T, K});
  Tensor ids = backend_.alloc(DType::I32, {T, K});
  backend_.topk_route(weights, ids, router_logits, int(K), /*renormalize=*/true);
  Tensor h = norm(residual, l.pre_ffn_norm_2);
  Tensor out = backend_.alloc(backend_.act_dtype(), residual.shape);
  backend_.moe_experts(out, h, weights, ids, l.experts_gate_up, l.experts_down,
                       config_.activation);
  backend_.rms_norm(out, out, l.post_ffn_norm_2, config_.rms_norm_eps, 0.f);
  return out;
}

// One decoder layer, updating the residual stream x [T, D] in place; pli [T, P] is this
// layer's per-layer input (undefined when the model has none).
void Gemma4Model::layer_forward(const Gemma4Layer& l, Tensor& x, const Tensor& pli,
                                const StepTensors& step, std::span<PagedKv> kv, int index) {
  const float eps = config_.rms_norm_eps;
  Tensor attn = attention_block(l, norm(x, l.input_norm), step, kv, index);
  backend_.rms_norm(attn, attn, l.post_attn_norm, eps, 0.f);
  backend_.add(x, x, attn);

  Tensor ffn = mlp_block(l, norm(x, l.pre_ffn_norm));
  if (l.router.defined()) {
    backend_.rms_norm(ffn, ffn, l.post_ffn_norm_1, eps, 0.f);
    backend_.add(ffn, ffn, moe_block(l, x));
  }
  backend_.rms_norm(ffn, ffn, l.post_ffn_norm, eps, 0.f);
  backend_.add(x, x, ffn);

  if (pli.defined()) {
    Tensor gate = linear(x, l.pli_gate);  // [T, P]
    Tensor gated = backend_.alloc(backend_.act_dtype(), gate.shape);
    backend_.act_mul(gated, gate, pli, config_.activation);
    Tensor branch = linear(gated, l.pli_proj);  // [T, D]
    backend_.rms_norm(branch, branch, l.pli_norm, eps, 0.f);
    backend_.add(x, x, branch);
  }
  if (l.layer_scalar != 1.f) backend_.scale(x, l.layer_scalar);
}

Tensor Gemma4Model::logits(const Tensor& x, const StepTensors& step) {
  const ModelConfig& c = config_;
  const int64_t S = step.sample_index.numel();
  Tensor last = backend_.alloc(backend_.act_dtype(), {S, c.hidden_size});
  backend_.gather_rows(last, x, step.sample_index);
  backend_.rms_norm(last, last, final_norm_, c.rms_norm_eps, 0.f);
  Tensor out = linear(last, lm_head_);
  if (c.final_logit_softcap > 0) backend_.softcap(out, c.final_logit_softcap);
  return out;
}

Tensor Gemma4Model::forward(const StepTensors& step, std::span<PagedKv> kv) {
  const int64_t T = step.num_tokens, P = g_.hidden_size_per_layer_input;
  TANDEM_CHECK(kv.size() == layers_.size(), "gemma4: {} KV entries for {} layers", kv.size(),
               layers_.size());
  Tensor x = backend_.alloc(backend_.act_dtype(), {T, config_.hidden_size});
  backend_.embedding(x, embed_, step.tokens, float(std::sqrt(double(config_.hidden_size))));
  Tensor pli = P > 0 ? per_layer_inputs(x, step) : Tensor{};  // [L, T, P]
  for (size_t i = 0; i < layers_.size(); i++) {
    Tensor layer_pli = P > 0 ? pli.slice_rows(int64_t(i), 1).reshape({T, P}) : Tensor{};
    // Each layer addresses its KV through its group's block table (a sharing layer: its
    // source's group).
    layer_forward(layers_[i], x, layer_pli, step.for_layer(int(i)), kv, int(i));
  }
  return logits(x, step);
}

}  // namespace tandem::arch
