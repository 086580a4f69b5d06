// How a DecoderModel's weights are cut across N tensor-parallel ranks (Megatron-style;
// docs/tensor-parallel.md). Rank r of N holds:
//   - q|k|v by heads: its Hq/N query heads and their KV heads (Hkv/N of them, or, when
//     Hkv < N, the one KV head its query heads read: replicated over N/Hkv ranks);
//   - gate|up by columns (its F/N of each half), down by input rows (the same F/N);
//   - o by input rows (its heads' Hq/N·Dh); o's and down's biases on rank 0 only, so the
//     all-reduce adds them once;
//   - MoE experts split by tensor: every expert's gate|up and down as the dense MLP's;
//   - the embedding and the LM head by vocabulary (rows [r·V/N, (r+1)·V/N)), the logits
//     gathered;
//   - norms, q/k norms and the router whole.
// Gemma 4 and Gemma 3n compose their own slicers of the pieces below (model/arch/gemma_tp.h).
// A WeightSlice says which part of a weight (its sources fused along dim 0 as the weight
// map fuses them) a rank reads; the loader reads only those rows or columns from the
// mapped file. A GGUF block type is cut into whole block rows, and into input columns only
// between its blocks (32 or 256 values): a slice inside a block is an error naming the
// weight, its type and N.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/communicator.h"
#include "core/tensor.h"

namespace tandem {

struct ModelConfig;  // model/config.h

struct WeightSlice {
  enum class Kind : uint8_t { Whole, Rows, Columns, Absent };
  struct Range {
    int64_t begin = 0, count = 0;
  };
  Kind kind = Kind::Whole;  // Absent: this rank holds none of it (loads as absent)
  std::vector<Range> rows;  // Rows: ranges of the fused dim 0 (per expert), in order
  Range columns;            // Columns: of the last dim
  int ranks = 1;            // N, for messages
};

// The slice of internal weight `name` ("layers.{i}.qkv", "embed", ...) at `layer`.
using WeightSlicer = std::function<WeightSlice(const std::string& name, int layer)>;

// A rank's share of the attention heads.
struct TpHeads {
  int q_heads = 0;   // Hq / N
  int kv_heads = 0;  // Hkv / N, or 1 when Hkv < N
  int kv_first = 0;  // the first KV head it holds
};

// Throws tandem::Error naming the dimension and N when N does not divide one the split
// needs (heads, KV heads, intermediate sizes, the vocabulary).
void check_tp_dims(const ModelConfig& c, int size);
TpHeads tp_heads(const ModelConfig& c, const TpShard& tp);
// The same for a layer of Hq query and Hkv KV heads (Gemma 4's full and sliding layers
// differ); N must divide Hq, and Hkv or N / Hkv (check_tp_heads).
TpHeads tp_heads(int num_heads, int num_kv_heads, const TpShard& tp);
// Throws tandem::Error naming `what`, its value `dim` and N when N does not divide it.
void check_tp_divides(int64_t dim, int size, const std::string& what);
// Throws tandem::Error naming `what`'s heads and N when the split above is not possible.
void check_tp_heads(int num_heads, int num_kv_heads, int size, const std::string& what);

// The pieces a slicer is made of (decoder_slicer's, Gemma 4's):
//   this rank's rows of a fused q|k|v [(Hq + kv_parts·Hkv)·Dh, ...] (kv_parts 0: q only; 1:
//   q|k, Gemma 4's k_eq_v; 2: q|k|v);
WeightSlice tp_qkv_rows(int num_heads, int num_kv_heads, int64_t head_dim, int kv_parts,
                        const TpShard& tp);
//   of a fused gate|up [2F, ...]: its F/N of each half;
WeightSlice tp_gate_up_rows(int64_t F, const TpShard& tp);
//   of a weight's K input columns (o, down): its K/N;
WeightSlice tp_columns(int64_t K, const TpShard& tp);
//   of a vocabulary-sized table [V, ...]: rows [r·V/N, (r+1)·V/N).
WeightSlice tp_vocab_rows(int64_t V, const TpShard& tp);
// The slicer of DecoderModel's weight map for rank tp.rank of tp.size.
WeightSlicer decoder_slicer(const ModelConfig& c, const TpShard& tp);

// The host tensor of `slice` of `parts` (a weight's sources, each [R_i, ...] or [R_i],
// fused along dim 0): views where the slice is whole rows of one part, a copy otherwise.
// Throws tandem::Error naming `label` when the parts do not hold the slice.
Tensor slice_parts(const std::vector<Tensor>& parts, const WeightSlice& slice,
                   const std::string& label,
                   const std::function<Tensor(const std::vector<Tensor>&)>& concat);

}  // namespace tandem
