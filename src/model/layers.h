// The layers every model composes (docs/DESIGN.md §5): value-returning helpers over Backend
// ops, in the spirit of gpt-fast's model.py — `h = rms_norm(be, x, l.attn_norm)`,
// `out = gated_mlp(be, h, l.mlp)`. DecoderModel, Gemma4Model and Gemma3nModel all go
// through these, so how a projection, a norm, an MLP, an MoE block or the LM head is
// computed is decided once:
//   - a projection is a Linear (backend/linear.h): a new weight format (FP8 scales) or
//     adapter kind (LoRA) is a field there and a case in Backend::linear, not a model edit;
//   - logits and MoE router scores are f32 on every backend (bf16 would round away the
//     gaps between near ties, in sampling and in top-k routing alike);
//   - tensor parallelism would enter here too: attention() and gated_mlp() / moe() are
//     where a rank's local heads and columns meet, and where the all-reduce after the
//     output projection would go.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/communicator.h"

namespace tandem {

// RMSNorm over the last dim: x / rms(x) · (weight + weight_offset).
struct RmsNorm {
  Tensor weight;              // [C], or undefined (the norm is absent)
  float eps = 1e-6f;
  float weight_offset = 0.f;  // 1 for Gemma 2/3's (1 + w) norms

  bool defined() const { return weight.defined(); }
};

// One attention block's weights: the fused q|k|v projection to the paged cache, attention
// over it, the output projection.
struct Attention {
  Linear qkv;     // [(Hq + 2·Hkv)·Dh, D]; [(Hq + Hkv)·Dh, D] when V is K (Gemma 4
                  // attention_k_eq_v); [Hq·Dh, D] when the layer reads another's KV
  Linear o;       // [D, Hq·Dh]
  QkNorm norm;    // per-head q/k/v norms (undefined tensors: none)
  RopeSpec rope;
  AttentionParams params;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  // The layer computes only q and attends over KV another layer wrote earlier this step.
  bool reads_shared_kv = false;
};

// down(act(gate · x) ⊙ (up · x)), gate and up fused into one projection [gate | up].
struct GatedMlp {
  Linear gate_up;  // [2F, D]
  Linear down;     // [D, F]
  Activation act = Activation::SiLU;
};

// Mixture of experts: route on f32 router scores (softmax, top k), run the chosen experts.
struct MoeBlock {
  Linear router;          // [E, D]
  Linear experts_gate_up; // stacked [E, 2F, D] (linear.h)
  Linear experts_down;    // stacked [E, D, F]
  int top_k = 0;
  bool renormalize = true;  // the kept routing weights sum to 1
  Activation act = Activation::SiLU;
};

// The model's end: final norm, optional ÷ logit_divisor (MiniCPM), the LM head in f32,
// optional final softcap (Gemma 2/3/4, 3n).
struct LmHead {
  RmsNorm final_norm;
  Linear head;  // [V, D] (the embedding when tied)
  float logit_divisor = 1.f;
  float softcap = 0.f;
  // Tensor parallelism: `head` holds this rank's V/N vocabulary rows, and the ranks' logits
  // are gathered into [S, V] (model/tp_slices.h); null: the whole head.
  Communicator* gather = nullptr;
};

// x · Wᵀ (+ b) in the activation dtype.   x [T, K] → [T, N]
// Fails on a projection with LoRA slots: those need the step's (the overload below).
Tensor linear(Backend& be, const Tensor& x, const Linear& l);
// x · Wᵀ (+ b), plus each token's adapter when l has LoRA slots and the step names them
// (step.lora): the base product is one GEMM for every row, the adapters are added
// after it (Backend::lora_add).   x [T, K] → [T, N]
Tensor linear(Backend& be, const Tensor& x, const Linear& l, const StepTensors& step);
// The same, with x's e4m3 copy `xq` for an FP8 linear (Backend::linear_fp8_input; undefined:
// as above).
Tensor linear(Backend& be, const Tensor& x, const Fp8Input& xq, const Linear& l,
              const StepTensors& step);
// x · Wᵀ in f32, unrounded (router scores, logits).   x [T, K] → [T, N] f32
Tensor linear_f32(Backend& be, const Tensor& x, const Linear& l);
// A new tensor: rms_norm(x).   x [R, C]
Tensor rms_norm(Backend& be, const Tensor& x, const RmsNorm& n);
// x = rms_norm(x), in place.
void rms_norm_in_place(Backend& be, Tensor& x, const RmsNorm& n);
// residual += x; returns rms_norm(residual) (the pre-norm step between two blocks).
Tensor add_rms_norm(Backend& be, Tensor& residual, const Tensor& x, const RmsNorm& n);
// table[ids] · scale.   table [V, D], ids [T] i32 → [T, D]
Tensor embedding(Backend& be, const Tensor& table, const Tensor& ids, float scale);
// Tensor parallelism's lookup in a vocabulary slice: the table's first `rows` rows are rows
// [first, first + rows) of the embedding; an id outside them gives a zero row, so the
// all-reduce of the ranks' outputs is the whole lookup. A table with a zero row after them
// ([rows + 1, D]) has its ids mapped on the device (backend/tp_ops.h, so a decode graph holds
// it); a table of exactly `rows` (a GGUF block table, used as loaded) is looked up on CPU
// ranks only (the ids and the output touched on the host).   ids [T] i32 → [T, D]
Tensor vocab_slice_embedding(Backend& be, const Tensor& table, int64_t rows, const Tensor& ids,
                             int64_t first, float scale);
// A rank's vocabulary slice of an embedding [V/N, D] as vocab_slice_embedding's device-mapped
// table [V/N + 1, D] (a zero row after it). A GGUF block table is returned as it is on a CPU
// rank; on a GPU rank its rows are dequantized once into the activation dtype (what its
// lookup gives; an LM head tied to it keeps the block slice). When `tied_head` reads a
// 16-bit slice (tied embeddings) it is pointed at the new table's rows.
Tensor vocab_slice_table(Backend& be, const Tensor& slice, Linear* tied_head);
// The step's embeddings under tensor parallelism: each rank's lookup in its slice of a
// vocabulary of `vocab` (a table from vocab_slice_table), all-reduced (exactly one rank holds
// each id's row, the others add zeros). embedding() when tp has no communicator.
//   ids [T] i32 → [T, D]
Tensor tp_embedding(Backend& be, const Tensor& table, const Tensor& ids, int64_t vocab,
                    const TpShard& tp, float scale);
// x[index].   x [T, D], index [S] i32 → [S, D]
Tensor gather_rows(Backend& be, const Tensor& x, const Tensor& index);
// A device vector of n ones (an unweighted norm's weight, a +1 bias).
Tensor ones(Backend& be, int64_t n);

// Images (StepTensors::media): each image's soft tokens replace the embeddings of their
// placeholder tokens, after the lookup (and its scale: soft tokens are not scaled).
//   x [T, D]
void write_media_rows(Backend& be, Tensor& x, const StepTensors& step);
// The step's token ids with every image soft token's replaced by `id` (Gemma 4's per-layer
// inputs read the pad id there); step.tokens itself when the step holds no image.
Tensor tokens_outside_media(Backend& be, const StepTensors& step, int32_t id);

// qkv projection → per-head norms → RoPE → K/V to `cache` (unless reads_shared_kv) →
// attention over `cache` → output projection.   h [T, D] → [T, D]; hq: h's e4m3 copy for
// an FP8 qkv (Fp8Input; undefined: none).
Tensor attention(Backend& be, const Tensor& h, const StepTensors& step, PagedKv& cache,
                 const Attention& a, const Fp8Input& hq = {});
// attention() after its qkv projection and before its output projection: the per-head
// attention output.   proj [T, (Hq + 2·Hkv)·Dh] → [T, Hq, Dh]
Tensor attention_heads(Backend& be, const Tensor& proj, const StepTensors& step, PagedKv& cache,
                       const Attention& a);
// h [T, D] → [T, D]; hq as in attention(). With an FP8 down projection the gated
// activation writes its input's e4m3 copy too (Backend::gated_act_fp8).
Tensor gated_mlp(Backend& be, const Tensor& h, const StepTensors& step, const GatedMlp& mlp,
                 const Fp8Input& hq = {});
// Routes each token on route_in's f32 router scores, runs the experts on x.
//   route_in, x [T, D] → [T, D]
Tensor moe(Backend& be, const Tensor& route_in, const Tensor& x, const MoeBlock& m);
// hidden [S, D] (the sampled tokens' final hidden states) → logits [S, V] f32, written into
// `into` when it is defined (a buffer of that shape: StepTensors::logits_out)
Tensor lm_head_logits(Backend& be, const Tensor& hidden, const LmHead& head,
                      const Tensor& into = {});

}  // namespace tandem
