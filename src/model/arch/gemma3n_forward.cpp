// Gemma 3n around its layers: the scaled embedding, the per-layer inputs, spreading
// the embedding into the AltUp streams and folding them back for the logits.
// Every op is per token, so a row's results do not depend on the other rows.
#include <cmath>

#include "model/arch/gemma3n.h"

namespace tandem::arch {

namespace {
// HF floors the mean square of a projected stream at 1e-5 before matching magnitudes.
constexpr float kStreamMinMeanSquare = 1e-5f;
}  // namespace

Tensor Gemma3nModel::stream(const Tensor& streams, int n) const {
  return streams.slice_rows(n, 1).reshape({streams.dim(1), streams.dim(2)});
}

Tensor Gemma3nModel::norm(const Tensor& x, const Tensor& w) {
  Tensor out = backend_.alloc(backend_.act_dtype(), x.shape);
  backend_.rms_norm(out, x, w, config_.rms_norm_eps, 0.f);
  return out;
}

Tensor Gemma3nModel::linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  Tensor out = backend_.alloc(backend_.act_dtype(), {x.rows(), w.dim(0)});
  backend_.linear(out, x, w, bias);
  return out;
}

// (rms_norm(x0 · W) / √D + embed_per_layer[id] · √P) / √2, laid out per layer.
//   x0 [T, D] → [L, T, P]
Tensor Gemma3nModel::per_layer_inputs(const Tensor& x0, const StepTensors& step) {
  const int64_t T = x0.dim(0), L = config_.num_layers, P = g_.hidden_size_per_layer_input;
  const DType dt = backend_.act_dtype();
  Tensor projected = linear(x0, per_layer_projection_);  // [T, L·P]
  backend_.scale(projected, float(1.0 / std::sqrt(double(config_.hidden_size))));
  Tensor per_layer = projected.reshape({T * L, P});
  backend_.rms_norm(per_layer, per_layer, per_layer_norm_, config_.rms_norm_eps, 0.f);
  Tensor embedded = backend_.alloc(dt, {T, L * P});
  backend_.embedding(embedded, embed_per_layer_, step.tokens, float(std::sqrt(double(P))));
  backend_.add(projected, projected, embedded);
  backend_.scale(projected, float(1.0 / std::sqrt(2.0)));
  Tensor out = backend_.alloc(dt, {L, T, P});
  backend_.swap_leading_dims(out, projected.reshape({T, L, P}));
  return out;
}

// Stream 0 is the embedding; stream n > 0 is its projection altup_in[n − 1], rescaled
// to the embedding's RMS.   x0 [T, D] → [N, T, D]
Tensor Gemma3nModel::init_streams(const Tensor& x0) {
  const int N = g_.altup_num_inputs;
  Tensor streams = backend_.alloc(backend_.act_dtype(), {N, x0.dim(0), x0.dim(1)});
  Tensor first = stream(streams, 0);
  backend_.copy(first, x0);
  for (int n = 1; n < N; n++) {
    Tensor s = stream(streams, n);
    backend_.linear(s, x0, altup_in_[size_t(n - 1)], {});
    backend_.match_rms(s, x0, kStreamMinMeanSquare);
  }
  return streams;
}

// The sampled tokens' streams, unprojected (altup_out) and rescaled to stream 0's RMS,
// averaged, normed, then the LM head and the final softcap.   streams [N, T, D] → [S, V]
Tensor Gemma3nModel::logits(const Tensor& streams, const StepTensors& step) {
  const int N = g_.altup_num_inputs;
  const int64_t S = step.sample_index.numel(), D = config_.hidden_size;
  const DType dt = backend_.act_dtype();
  Tensor first = backend_.alloc(dt, {S, D});
  backend_.gather_rows(first, stream(streams, 0), step.sample_index);
  Tensor sum = backend_.alloc(dt, {S, D});
  backend_.copy(sum, first);
  Tensor picked = backend_.alloc(dt, {S, D});
  Tensor unembedded = backend_.alloc(dt, {S, D});
  for (int n = 1; n < N; n++) {
    backend_.gather_rows(picked, stream(streams, n), step.sample_index);
    backend_.linear(unembedded, picked, altup_out_[size_t(n - 1)], {});
    backend_.match_rms(unembedded, first, kStreamMinMeanSquare);
    backend_.add(sum, sum, unembedded);
  }
  backend_.scale(sum, float(1.0 / N));
  backend_.rms_norm(sum, sum, final_norm_, config_.rms_norm_eps, 0.f);
  Tensor out = linear(sum, lm_head_);
  if (config_.final_logit_softcap > 0) backend_.softcap(out, config_.final_logit_softcap);
  return out;
}

Tensor Gemma3nModel::forward(const StepTensors& step, std::span<PagedKv> kv) {
  const int64_t T = step.num_tokens, D = config_.hidden_size;
  Tensor x0 = backend_.alloc(backend_.act_dtype(), {T, D});
  // HF keeps √D as an f32 tensor and multiplies in the weights' dtype.
  backend_.embedding(x0, embed_, step.tokens, float(std::sqrt(double(D))));
  Tensor pli = per_layer_inputs(x0, step);
  Tensor streams = init_streams(x0);
  const int64_t P = g_.hidden_size_per_layer_input;
  for (int i = 0; i < config_.num_layers; i++) {
    Tensor layer_input = pli.slice_rows(i, 1).reshape({T, P});
    // Each layer addresses its KV group's blocks (a sharing layer: its producer's group).
    layer_forward(layers_[size_t(i)], streams, layer_input, step.for_layer(i), kv, i);
  }
  return logits(streams, step);
}

}  // namespace tandem::arch
