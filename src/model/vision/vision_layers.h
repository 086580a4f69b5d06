// The pieces both vision towers compose from Backend ops (model/layers.h style):
//   - ImageBatch: a step's images as the rows of one scratch paged-KV step, so the
//     encoders' attention — each image's patches over its own patches, both ways — is the
//     backend's paged attention with every token's image span its whole image
//     (StepTensors::media_ends): no dense attention op of its own, and the same kernels
//     as the text model's image blocks;
//   - LayerNormW (SigLIP's LayerNorm with a bias), ClippedLinear (Gemma 4: clamp the input
//     and the output to the checkpoint's bounds), plain (ungated) activations;
//   - sum_rows: pooling as a sum of gathered rows, in the order the caller lists them.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/layers.h"
#include "model/weight_map.h"

namespace tandem {

// A batch of images as the rows of one scratch step: image i's tokens are row i at
// positions 0 .. lengths[i] - 1, each seeing the whole image.
struct ImageBatch {
  std::vector<int> lengths;  // tokens (patches) of each image
  int num_tokens = 0;
  StepTensors step;  // positions, rows, slots, block tables, media_ends
};

// block_size 16; blocks of image i follow those of image i - 1.
ImageBatch make_image_batch(Backend& be, std::span<const int> lengths);

// Each image's tokens attend over that image's tokens, both ways.   q [N, H, Dh], k, v
// [N, Hkv, Dh] → [N, H, Dh]. The scratch cache lives for the call.
Tensor image_attention(Backend& be, const ImageBatch& batch, const Tensor& q, const Tensor& k,
                       const Tensor& v, float scale);

struct LayerNormW {
  Tensor weight, bias;  // [C] each
  float eps = 1e-6f;
};

Tensor layer_norm(Backend& be, const Tensor& x, const LayerNormW& n);

// A projection whose input and output are clamped (HF Gemma4ClippableLinear); ±inf
// bounds (no buffers in the checkpoint) clamp nothing.
struct ClippedLinear {
  Linear linear;
  float in_min = -std::numeric_limits<float>::infinity();
  float in_max = std::numeric_limits<float>::infinity();
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();
};

// clamp(clamp(x) · Wᵀ).   x [T, K] → [T, N] (x itself is left as it is).
Tensor clipped_linear(Backend& be, const Tensor& x, const ClippedLinear& l);

// act(x), elementwise, as a new tensor: act_mul against ones, 256 rows at a time;
// `ones_cache` holds them (grown here when too small; callers keep it between calls).
//   x [R, C]
Tensor activation(Backend& be, const Tensor& x, Activation act, Tensor& ones_cache);

// out[m] = Σ_j x[index[j][m]] in the order of j: one gather and one add per j.
//   x [N, D], index[j] [M] i32 on the host → [M, D]
Tensor sum_rows(Backend& be, const Tensor& x, const std::vector<std::vector<int32_t>>& index);

// A weight of `loader`'s map as a plain 16-bit Linear (weight, and `name`_bias when the
// map has it): the towers are never quantized with the text model.
Linear tower_linear(WeightLoader& w, const std::string& name, int layer, Shape expected);

// 0, 1, ..., n - 1; and a host i32 vector on the device ([v.size()]).
std::vector<int32_t> iota_ids(int64_t n);
Tensor upload_i32(Backend& be, const std::vector<int32_t>& v);

}  // namespace tandem
