// Linear: one projection's weights as Backend::linear takes them — out = x · Wᵀ (+ bias).
// The weight is held in the dtype the backend chose for it (Backend::weight_dtype), so a
// 16-bit checkpoint can stay 16-bit on a backend with 16-bit kernels, and a quantized one
// quantized. What a quantized or adapted projection carries beyond W and b lives here too,
// so a new weight format changes this struct and the backends, never the models:
//   - FP8 (e4m3) weights: `weight` in F8E4M3 plus `quant` (the weight's scales per tensor,
//     per output channel or per [block_n, block_k] block, and how x is scaled: a static
//     scale from the checkpoint or a dynamic one computed per step);
//   - LoRA: `lora`, stacked adapter slots; the step says which slot each token uses.
// A backend refuses (fails, never ignores) a Linear whose quantization or adapters it does
// not implement: today both backends take plain linears only.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace tandem {

// How a quantized weight's scales cover it (W ≈ scale ⊙ Wq).
enum class ScaleGranularity : uint8_t {
  PerTensor,   // scale [1]
  PerChannel,  // scale [N]: one per output row of W
  Block,       // scale [⌈N / block_n⌉, ⌈K / block_k⌉]
};

// How x is brought to the weight's format before the product.
enum class InputScaling : uint8_t {
  None,     // x enters in the activation dtype (weight-only quantization)
  Static,   // one calibrated scale from the checkpoint (`input_scale` [1])
  Dynamic,  // computed from x each step (per token)
};

struct LinearQuant {
  ScaleGranularity granularity = ScaleGranularity::PerTensor;
  Tensor weight_scale;  // f32, shaped by `granularity`
  int block_n = 0;      // Block only
  int block_k = 0;
  InputScaling input = InputScaling::None;
  Tensor input_scale;   // f32 [1], Static only
};

// Low-rank adapters beside W: out += scaling · (x · Aᵀ) · Bᵀ for the token's slot.
struct LinearLora {
  Tensor a;  // [slots, r, K]
  Tensor b;  // [slots, N, r]
  float scaling = 1.f;
};

struct Linear {
  Tensor weight;  // [N, K] in Backend::weight_dtype(stored dtype)
  Tensor bias;    // [N] in the activation dtype, or undefined
  std::optional<LinearQuant> quant;  // nullopt: weight is used as stored
  std::optional<LinearLora> lora;    // nullopt: no adapters

  bool defined() const { return weight.defined(); }
  int64_t out_features() const { return weight.dim(0); }
  int64_t in_features() const { return weight.dim(1); }
  // Only W and b: what every backend's linear takes today.
  bool plain() const { return !quant && !lora; }
};

}  // namespace tandem
