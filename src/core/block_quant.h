// ggml's block types (core/ggml_blocks.h) to and from f32.
//
// dequantize_row is the definition every kernel is measured against: the value of each
// weight exactly as ggml's dequantize_row_* computes it in f32 — the same products in the
// same order, each rounded once (e.g. Q4_K: fl(fl(d·sc)·q − fl(dmin·mn))) — so a GGUF tensor
// read here holds bit for bit the numbers llama.cpp's reference uses.
//
// quantize_row is a plain encoder for tests and tools: a valid block of each type that
// represents x well (round to nearest on a per-block range), not llama-quantize's search
// for the best scales. Any encoder's blocks decode the same way, which is what matters.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem {

// out[0, k) = the values of the blocks of one row of `type`; k a multiple of its block.
void dequantize_row(DType type, const void* blocks, float* out, int64_t k);

// blocks = x[0, k) encoded as `type`; k a multiple of its block. Non-finite x are refused.
void quantize_row(DType type, const float* x, void* blocks, int64_t k);

}  // namespace tandem
