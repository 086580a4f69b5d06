// One Gemma 3n decoder layer, in HF's order (Gemma3nTextDecoderLayer.forward):
//   predictions = AltUp.predict(streams); active = predictions[a]
//   x = input_norm(active)
//   h = (active + post_attn_norm(attention(x)) + laurel(x)) / √2
//   activated = h + post_ffn_norm(mlp(pre_ffn_norm(h)))
//   corrected = AltUp.correct(predictions, activated)
//   corrected[1:] += per-layer input gated by corrected[a]
#include <cmath>

#include "model/arch/gemma3n.h"
#include "model/config.h"

namespace tandem::arch {

void Gemma3nModel::layer_forward(const Gemma3nLayer& l, Tensor& streams, const Tensor& pli,
                                 const StepTensors& step, std::span<PagedKv> kv, int index) {
  Tensor predictions = altup_predict(l, streams);
  Tensor active = stream(predictions, gemma_.altup_active_idx);
  Tensor x = rms_norm(backend_, active, l.input_norm);
  Tensor laurel_out = laurel(l, x);
  // A layer past the sharing point computes only q and attends over its producer's cache.
  PagedKv& cache = kv[size_t(l.kv_source.value_or(index))];
  Tensor h = attention(backend_, x, step, cache, l.attention);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(h);  // the ranks' heads meet
  rms_norm_in_place(backend_, h, l.post_attn_norm);
  backend_.add(h, active, h);
  backend_.add(h, h, laurel_out);
  backend_.scale(h, float(1.0 / std::sqrt(2.0)));
  Tensor activated = mlp_block(l, rms_norm(backend_, h, l.pre_ffn_norm), step);
  if (config_.tp.comm) config_.tp.comm->all_reduce_sum(activated);  // the ranks' columns meet
  rms_norm_in_place(backend_, activated, l.post_ffn_norm);
  backend_.add(activated, h, activated);
  altup_correct(l, predictions, activated);
  add_per_layer_input(l, predictions, pli);
  streams = predictions;
}

// tanh(router(router_norm(x) / D)): the per-token AltUp coefficients' input.
//   x [T, D] → [T, N]
Tensor Gemma3nModel::router_modalities(const Gemma3nLayer& l, const Tensor& x) {
  Tensor h = rms_norm(backend_, x, l.router_norm);
  backend_.scale(h, float(1.0 / double(config_.hidden_size)));
  Tensor m = linear(backend_, h, l.router);
  backend_.softcap(m, 1.f);  // 1 · tanh(m / 1) = tanh(m)
  return m;
}

// predictions[m] = streams[m] + Σ_s C[m, s] · streams[s], C = predict_coefs(modalities)
// reshaped [N, N] per token.   streams [N, T, D] → [N, T, D]
Tensor Gemma3nModel::altup_predict(const Gemma3nLayer& l, const Tensor& streams) {
  Tensor modalities = router_modalities(l, stream(streams, gemma_.altup_active_idx));
  Tensor coefs = linear(backend_, modalities, l.predict_coefs);  // [T, N·N]
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
  Tensor coefs = linear(backend_, modalities, l.correct_coefs);  // [T, N], the +1 its bias
  Tensor innovation = backend_.alloc(backend_.act_dtype(), activated.shape);
  backend_.sub(innovation, activated, stream(predictions, gemma_.altup_active_idx));
  backend_.mix_streams(predictions, innovation.reshape({1, activated.dim(0), activated.dim(1)}),
                       coefs);
}

// LAuReL: x + laurel_norm(right(left(x))).   x [T, D]
Tensor Gemma3nModel::laurel(const Gemma3nLayer& l, const Tensor& x) {
  Tensor out = linear(backend_, linear(backend_, x, l.laurel_left), l.laurel_right);
  rms_norm_in_place(backend_, out, l.laurel_norm);
  backend_.add(out, x, out);
  return out;
}

// down(act(gate) · up); on sparse layers the gate first keeps only what lies above
// mean + σ · Φ⁻¹(sparsity) per token.   x [T, D] → [T, D]
Tensor Gemma3nModel::mlp_block(const Gemma3nLayer& l, const Tensor& x, const StepTensors& step) {
  if (!l.sparse_gate) return gated_mlp(backend_, x, step, l.mlp);
  const int64_t T = x.dim(0), F = l.mlp.down.in_features();
  const DType dt = backend_.act_dtype();
  Tensor gate_up = linear(backend_, x, l.mlp.gate_up, step);  // [T, 2F]
  Tensor gate = backend_.alloc(dt, {T, F}), up = backend_.alloc(dt, {T, F});
  backend_.split_columns(gate_up, {&gate, &up});
  sparsify_gate(gate, l.gate_std_multiplier);
  Tensor act = backend_.alloc(dt, {T, F});
  backend_.act_mul(act, gate, up, l.mlp.act);
  return linear(backend_, act, l.mlp.down, step);
}

// The gate's activation sparsity. Its cutoff is a statistic of the whole row [F]: under
// tensor parallelism (a rank holds F/N columns) the ranks' columns are gathered, the whole
// row sparsified exactly as at N = 1 (gaussian_topk's own two-pass statistics), and
// this rank's columns kept. A gather of F values a token, not an all-reduce of the row's
// sums: it keeps gaussian_topk's fixed-order double statistics, and the rows are small.
//   gate [T, F/N] in place
void Gemma3nModel::sparsify_gate(Tensor& gate, float std_multiplier) {
  const TpShard& tp = config_.tp;
  if (!tp.comm || tp.size == 1) return backend_.gaussian_topk(gate, std_multiplier);
  const int64_t T = gate.dim(0), f = gate.dim(1);
  Tensor whole = backend_.alloc(gate.dtype, {T, f * tp.size});
  tp.comm->all_gather_columns(whole, gate);
  backend_.gaussian_topk(whole, std_multiplier);
  Tensor before = backend_.alloc(gate.dtype, {T, f * tp.rank});
  Tensor after = backend_.alloc(gate.dtype, {T, f * (tp.size - 1 - tp.rank)});
  if (tp.rank == 0)
    backend_.split_columns(whole, {&gate, &after});
  else if (tp.rank + 1 == tp.size)
    backend_.split_columns(whole, {&before, &gate});
  else
    backend_.split_columns(whole, {&before, &gate, &after});
}

// corrected[n] += per_layer_branch(corrected[a] · output_scale, pli) for n = 1 .. N − 1
// (HF's corrected_predictions[1:], whatever the active index).
//   corrected [N, T, D], pli [T, P]
void Gemma3nModel::add_per_layer_input(const Gemma3nLayer& l, Tensor& corrected,
                                       const Tensor& pli) {
  Tensor first = backend_.alloc(backend_.act_dtype(), {pli.dim(0), config_.hidden_size});
  backend_.copy(first, stream(corrected, gemma_.altup_active_idx));
  if (gemma_.altup_correct_scale) backend_.mul(first, first, l.output_scale);
  Tensor update = per_layer_branch(backend_, first, pli, l.per_layer);  // [T, D]
  for (int n = 1; n < gemma_.altup_num_inputs; n++) {
    Tensor s = stream(corrected, n);
    backend_.add(s, s, update);
  }
}

}  // namespace tandem::arch
