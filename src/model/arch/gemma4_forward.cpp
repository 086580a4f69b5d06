// Gemma 4 forward: embeddings and per-layer inputs, the decoder layer (attention with
// optional KV sharing, dense MLP, optional MoE block, per-layer input branch), logits.
// Every op follows modeling_gemma4.py in order, so fp32 results match it to round-off.
#include <cmath>

#include "core/error.h"
#include "model/arch/gemma4.h"
#include "model/config.h"
#include "model/pooled_hidden.h"

namespace tandem::arch {

// HF Gemma4TextRouter + Gemma4TextExperts, from the residual before the MLP's norm:
// route on rms_norm(x) · scale / √D (softmax, top-k, renormalized, × per_expert_scale,
// folded into the experts), run the experts on pre_ffn_norm_2(x), then post_ffn_norm_2.
//   residual [T, D] → [T, D]
Tensor Gemma4Model::moe_block(const Gemma4Layer& l, const Tensor& residual) {
  Tensor routed = rms_norm(backend_, residual, l.router_norm);
  backend_.scale(routed, float(std::pow(double(config_.hidden_size), -0.5)));
  Tensor out = moe(backend_, routed, rms_norm(backend_, residual, l.pre_ffn_norm_2), l.moe);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(out);  // the ranks' expert columns
  rms_norm_in_place(backend_, out, l.post_ffn_norm_2);
  return out;
}

// One decoder layer, updating the residual stream x [T, D] in place; pli [T, P] is this
// layer's per-layer input (undefined when the model has none).
void Gemma4Model::layer_forward(const Gemma4Layer& l, Tensor& x, const Tensor& pli,
                                const StepTensors& step, std::span<PagedKv> kv, int index) {
  // A KV-reading layer attends over its source's cache, written earlier in this step.
  PagedKv& cache = kv[size_t(l.spec.kv_source.value_or(index))];
  Tensor attn = attention(backend_, rms_norm(backend_, x, l.input_norm), step, cache, l.attention);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(attn);  // the ranks' heads meet
  rms_norm_in_place(backend_, attn, l.post_attn_norm);
  Tensor h = add_rms_norm(backend_, x, attn, l.pre_ffn_norm);  // x += attn; h = norm(x)

  Tensor ffn = gated_mlp(backend_, h, step, l.mlp);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(ffn);  // the ranks' columns meet
  if (l.has_moe()) {
    rms_norm_in_place(backend_, ffn, l.post_ffn_norm_1);
    backend_.add(ffn, ffn, moe_block(l, x));
  }
  rms_norm_in_place(backend_, ffn, l.post_ffn_norm);
  backend_.add(x, x, ffn);

  if (pli.defined()) backend_.add(x, x, per_layer_branch(backend_, x, pli, l.per_layer));
  if (l.layer_scalar != 1.f) backend_.scale(x, l.layer_scalar);
}

Tensor Gemma4Model::forward(const StepTensors& step, std::span<PagedKv> kv) {
  const int64_t T = step.num_tokens, P = gemma_.hidden_size_per_layer_input;
  TANDEM_CHECK(kv.size() == layers_.size(), "gemma4: {} KV entries for {} layers", kv.size(),
               layers_.size());
  // Image soft tokens (HF Gemma4Model): their placeholders embed as the pad token, the
  // soft tokens replace those embeddings, and the per-layer inputs read the pad id there
  // beside the merged embeddings.
  const Tensor ids = tokens_outside_media(backend_, step, pad_token_id_);
  Tensor x = tp_embedding(backend_, embed_, ids, config_.vocab_size, config_.tp,
                          float(std::sqrt(double(config_.hidden_size))));
  write_media_rows(backend_, x, step);
  Tensor pli = P > 0 ? per_layer_inputs(backend_, x, ids, per_layer_) : Tensor{};
  for (size_t i = 0; i < layers_.size(); i++) {
    Tensor layer_pli = P > 0 ? pli.slice_rows(int64_t(i), 1).reshape({T, P}) : Tensor{};
    layer_forward(layers_[i], x, layer_pli, step, kv, int(i));
  }
  return step_outputs(backend_, x, step, head_);  // logits, and pooled rows (pooled_hidden.h)
}

}  // namespace tandem::arch
