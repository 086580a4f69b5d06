// Per-channel FP8 quantization of a 16-bit weight, as llm-compressor's FP8_DYNAMIC scheme
// writes it: per output row o, s[o] = max|W[o, :]| / 448 rounded to bf16 (the checkpoint
// stores weight_scale in bf16, so the scale the loader applies is the stored one), and
// Wq[o, k] = e4m3(W[o, k] / s[o]) (nearest even, saturating). Online quantization
// (--quantization fp8), `tandem quantize` and `random-model --dtype fp8` all use it, so a
// model quantized at load and the same model written by `tandem quantize` hold the same
// bytes.
#pragma once

#include "core/tensor.h"

namespace tandem {

struct Fp8Rows {
  Tensor weight;  // F8E4M3 [N, K], host
  Tensor scale;   // BF16 [N, 1], host
};

// w: a host [N, K] tensor of any float dtype. Rows in parallel on ThreadPool::global().
Fp8Rows quantize_fp8_per_channel(const Tensor& w);
// The bf16-rounded scale of a row whose largest magnitude is `amax` (a zero row gets the
// smallest positive scale, as if amax were 1e-12).
float fp8_row_scale(float amax);

}  // namespace tandem
