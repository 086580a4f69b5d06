// Gemma 3n around its layers: the scaled embedding, the per-layer inputs (shared with
// Gemma 4, gemma_per_layer.h), spreading the embedding into the AltUp streams and folding
// them back for the logits.
// Every op is per token, so a row's results do not depend on the other rows.
#include <cmath>

#include "model/arch/gemma3n.h"
#include "model/config.h"
#include "model/pooled_hidden.h"

namespace tandem::arch {

namespace {
// HF floors the mean square of a projected stream at 1e-5 before matching magnitudes.
constexpr float kStreamMinMeanSquare = 1e-5f;
}  // namespace

Tensor Gemma3nModel::stream(const Tensor& streams, int n) const {
  return streams.slice_rows(n, 1).reshape({streams.dim(1), streams.dim(2)});
}

// Stream 0 is the embedding; stream n > 0 is its projection altup_in[n − 1], rescaled
// to the embedding's RMS.   x0 [T, D] → [N, T, D]
Tensor Gemma3nModel::init_streams(const Tensor& x0) {
  const int N = gemma_.altup_num_inputs;
  Tensor streams = backend_.alloc(backend_.act_dtype(), {N, x0.dim(0), x0.dim(1)});
  Tensor first = stream(streams, 0);
  backend_.copy(first, x0);
  for (int n = 1; n < N; n++) {
    Tensor s = stream(streams, n);
    backend_.linear(s, x0, altup_in_[size_t(n - 1)]);
    backend_.match_rms(s, x0, kStreamMinMeanSquare);
  }
  return streams;
}

// The tokens' streams, unprojected (altup_out) and rescaled to stream 0's RMS, averaged.
//   streams [N, T, D], index [I] → [I, D]
Tensor Gemma3nModel::folded(const Tensor& streams, const Tensor& index) {
  const int N = gemma_.altup_num_inputs;
  Tensor first = gather_rows(backend_, stream(streams, 0), index);  // [I, D]
  Tensor sum = backend_.alloc(first.dtype, first.shape);
  backend_.copy(sum, first);
  Tensor unembedded = backend_.alloc(first.dtype, first.shape);
  for (int n = 1; n < N; n++) {
    Tensor picked = gather_rows(backend_, stream(streams, n), index);
    backend_.linear(unembedded, picked, altup_out_[size_t(n - 1)]);
    backend_.match_rms(unembedded, first, kStreamMinMeanSquare);
    backend_.add(sum, sum, unembedded);
  }
  backend_.scale(sum, float(1.0 / N));
  return sum;
}

// The embedding rows' pooled hidden states (pooled_hidden.h), then the sampled tokens'
// logits.   streams [N, T, D] → [S, V] f32
Tensor Gemma3nModel::logits(const Tensor& streams, const StepTensors& step) {
  if (step.pool.defined())
    pool_hidden(backend_, folded(streams, step.pool.index), step.pool, head_.final_norm);
  return lm_head_logits(backend_, folded(streams, step.sample_index), head_, step.logits_out);
}

Tensor Gemma3nModel::forward(const StepTensors& step, std::span<PagedKv> kv) {
  const int64_t T = step.num_tokens, D = config_.hidden_size;
  // HF keeps √D as an f32 tensor and multiplies in the weights' dtype.
  Tensor x0 = tp_embedding(backend_, embed_, step.tokens, config_.vocab_size, config_.tp,
                           float(std::sqrt(double(D))));
  Tensor pli = per_layer_inputs(backend_, x0, step.tokens, per_layer_);
  Tensor streams = init_streams(x0);
  const int64_t P = gemma_.hidden_size_per_layer_input;
  for (int i = 0; i < config_.num_layers; i++) {
    Tensor layer_input = pli.slice_rows(i, 1).reshape({T, P});
    layer_forward(layers_[size_t(i)], streams, layer_input, step, kv, i);
  }
  return logits(streams, step);
}

}  // namespace tandem::arch
