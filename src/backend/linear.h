// Linear: one projection's weights as Backend::linear takes them — out = x · Wᵀ (+ bias).
// The weight is held in the dtype the backend chose for it (Backend::weight_dtype), so a
// 16-bit checkpoint can stay 16-bit on a backend with 16-bit kernels, and a quantized one
// quantized. What a quantized or adapted projection carries beyond W and b lives here too,
// so a new weight format changes this struct and the backends, never the models:
//   - FP8 (e4m3) weights: `weight` in F8E4M3 plus `quant` (the weight's scales per tensor,
//     per output channel or per [block_n, block_k] block, and how x is scaled: a static
//     scale from the checkpoint or a dynamic one computed per step);
//   - LoRA: `lora`, stacked adapter slots; the step says which slot each token uses
//     (StepTensors::lora, step_tensors.h) and Backend::lora_add adds the adapters after the
//     base product, so the base GEMM is shared by every row of the step.
// A backend refuses (fails, never ignores) a Linear whose quantization it does not
// implement; Backend::linear computes W and b only, whatever `lora` holds.
//
// A MoE block's experts are one stacked Linear per projection (MoeBlock): weight
// [E, N, K], and with FP8 every LinearQuant tensor gains the same leading E — weight_scale
// [E, 1], [E, N] or [E, ⌈N / block_n⌉, ⌈K / block_k⌉], input_scale [E, 1] — so that
// expert_linear(l, e) is expert e's own [N, K] Linear, as a view.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

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

// Low-rank adapters beside W, one per slot: out[t] += (x[t] · A[s]ᵀ) · B[s]ᵀ with
// s = the token's slot. Invariants that let one bank shape serve every adapter, so a step
// makes one pass per projection whatever mix of adapters its rows use:
//   - slot 0 is the base model: all zeros, and never computed (a row without an adapter
//     pays nothing extra);
//   - every adapter is padded with zeros to the bank's rank R (zero rows of A, zero
//     columns of B), and its scaling (alpha / r, alpha / √r with rslora, per-module
//     rank_pattern / alpha_pattern) is folded into B when it is written: a slot needs no
//     rank or scale of its own;
//   - a fused projection (q|k|v, gate|up) stacks its shards' adapters along R: shard j's
//     A in rows [j·r_max, (j+1)·r_max) and its B only in the shard's output rows of those
//     columns (B is block-diagonal), which is exactly Σ_j B_j · (A_j x) on each shard.
struct LinearLora {
  Tensor a;  // [slots, R, K]
  Tensor b;  // [slots, N, R]
  // The output row where each shard of a fused projection ends, in order (the last is N);
  // empty: one shard. Shard j's rows of B are zero outside columns [j·R/n, (j+1)·R/n) for
  // n shards, which a backend may skip (CUDA does: a fused q|k|v reads a third of B).
  std::vector<int64_t> shard_ends;

  int num_slots() const { return int(a.dim(0)); }
  int64_t rank() const { return a.dim(1); }
};

struct Linear {
  Tensor weight;  // [N, K] in Backend::weight_dtype(stored dtype)
  Tensor bias;    // [N] in the activation dtype, or undefined
  std::optional<LinearQuant> quant;  // nullopt: weight is used as stored
  std::optional<LinearLora> lora;    // nullopt: no adapters
  // A projection fused along N (q|k|v, gate|up) whose pieces are stored in different weight
  // types — a GGUF Q4_K_M file holds q and k in q4_k and v in q6_k, which no single weight
  // tensor can hold: each piece is a plain Linear (weight and bias) writing its own block of
  // output columns, in order; `weight` and `bias` are then undefined. model/layers runs the
  // pieces and joins their outputs (Backend::concat_columns): a backend's linear never sees
  // a Linear with pieces. `lora` still covers the whole projection.
  std::vector<Linear> pieces;

  bool defined() const { return weight.defined() || !pieces.empty(); }
  int64_t out_features() const {
    if (pieces.empty()) return weight.dim(0);
    int64_t n = 0;
    for (const Linear& p : pieces) n += p.out_features();
    return n;
  }
  int64_t in_features() const { return pieces.empty() ? weight.dim(1) : pieces[0].in_features(); }
  // Only W and b: what every backend's linear takes today (adapters are lora_add's).
  bool plain() const { return !quant; }
  // FP8 weights whose input is quantized per token on the fly (dynamic scales, per-tensor or
  // per-channel weights): the linears an Fp8Input (below) can feed.
  bool takes_fp8_input() const {
    return quant && quant->input == InputScaling::Dynamic &&
           quant->granularity != ScaleGranularity::Block;
  }
};

// Expert e of a stacked expert projection (see the top of this file): views of its weight
// and scales, sharing their storage.
Linear expert_linear(const Linear& stacked, int64_t e);

// An activation's e4m3 copy for the FP8 linears that read it (Linear::takes_fp8_input):
// q [T, K] e4m3 = e4m3(x / s), scales [T] f32 = s = max(|x[t]|, 1e-12) / 448 per token, byte
// for byte what the linear would make of x itself. A backend that can writes it in the op
// that writes x (Backend::add_rms_norm_fp8 and friends), so the linear does not read x
// again to quantize it; undefined where it cannot (the linear then quantizes x as always).
struct Fp8Input {
  Tensor q;       // [T, K] F8E4M3
  Tensor scales;  // [T] f32
  bool defined() const { return q.defined(); }
};

}  // namespace tandem
