// How Gemma 4 and Gemma 3n are cut across tensor-parallel ranks (docs/tensor-parallel.md): like
// DecoderModel (model/tp_slices.h) — q|k|v (q|k with attention_k_eq_v, q alone on a layer
// that reads another's KV) by heads of that layer's own head_dim and KV heads, o and down
// by input columns, gate|up by columns, each MoE expert by tensor, the embedding, the
// per-layer embedding and the LM head by vocabulary — and the small pieces whole on every
// rank: norms, the router, the per-layer input projection and each layer's per-layer
// branch (gate [P, D], proj [D, P]), which every rank computes alike from the all-reduced
// residual. A layer reading another layer's KV reads its own rank's heads of it: the heads
// of a KV-sharing pair are split alike, so the sharing is per rank.
// Gemma 3n the same way, its AltUp (router, coefficients, the stream projections), LAuReL
// ([R, D], [D, R]) and per-layer branch whole on every rank: all work on the residual
// streams, which every rank holds whole after each all-reduce. Its activation sparsity is a
// statistic of the whole gate row: see Gemma3nModel::mlp_block.
#pragma once

#include "model/arch/gemma3n_config.h"
#include "model/arch/gemma4_config.h"
#include "model/tp_slices.h"

namespace tandem::arch {

// Throws tandem::Error naming the layer's dimension, its value and N when N does not divide
// one the split needs (per-layer heads and KV heads, MLP widths, moe_intermediate_size, the
// vocabularies).
void check_gemma4_tp(const ModelConfig& c, const Gemma4Config& g, int size);

// The slicer of Gemma 4's weight map for rank tp.rank of tp.size. The stacked experts are
// cut by gemma4_expert_slice, not through it.
WeightSlicer gemma4_slicer(const ModelConfig& c, const Gemma4Config& g, const TpShard& tp);

// Gemma 3n's: per-layer intermediate sizes, heads, the vocabulary and (when it is not
// padded to it) the per-layer vocabulary. The AltUp streams' "altup_in.{i}" rules number
// streams, not layers.
void check_gemma3n_tp(const ModelConfig& c, const Gemma3nConfig& g, int size);
WeightSlicer gemma3n_slicer(const ModelConfig& c, const Gemma3nConfig& g, const TpShard& tp);

// This rank's share of a stacked expert tensor, on the host: gate|up [E, 2·Fe, D] → its
// Fe/N rows of each half [E, 2·Fe/N, D]; down [E, D, Fe] → its Fe/N columns [E, D, Fe/N].
Tensor gemma4_experts_gate_up_slice(const Tensor& gate_up, const TpShard& tp);
Tensor gemma4_experts_down_slice(const Tensor& down, const TpShard& tp);

}  // namespace tandem::arch
