// The step as the ops read it: the StepPlan's arrays on the device (engine/step_plan.h),
// and where each layer's K/V lives. One representation for every step and every model:
// the step-wide arrays, then one KvGroupTensors per KV group (docs/DESIGN.md §3: full-attention
// layers and each sliding window index their own block space). A layer's storage carries
// its group (PagedKv::group), and the ops address it through step.kv(cache), so no model
// selects a view and none can address the wrong group's blocks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace tandem {

class Backend;

// K and V storage of one layer: [num_blocks of its group, block_size, kv_heads, head_dim]
// each (undefined on a layer that reads another layer's KV).
struct PagedKv {
  Tensor k;
  Tensor v;
  int group = 0;  // the KV group whose block ids index this storage
};

// One KV group's addresses for this step.
struct KvGroupTensors {
  Tensor slot_map;     // [T] i32: block * block_size + offset where token t's K/V is written
                       // (negative: nowhere, a padding row)
  Tensor block_table;  // [B, max_blocks] i32: row b's block ids, by logical block
  int max_blocks = 0;  // the table's width
};

// The step's LoRA rows (backend/linear.h): which slot each token's projections add, and the
// same tokens grouped by slot, for kernels that want each adapter's rows contiguous (one
// launch for every adapter, consecutive rows reading the same A and B).
struct LoraRows {
  Tensor slots;        // [T] i32: each token's slot; 0 = the base model
  Tensor order;        // [T] i32: the tokens of slot > 0, by slot, then by token; the entries
                       // past num_active are unused (stale, not necessarily valid indices)
  Tensor order_slots;  // [T] i32: the slot of each entry of order (a kernel reads both at
                       // once instead of the slot through the token)
  Tensor num_active;   // [1] i32: how many tokens have an adapter
  Tensor tiles;        // [1 + kLoraTileInts · T] i32: order cut into tiles of at most
                       // kLoraTile entries that never hold two slots (lora_tiles): [0] the
                       // count, then a record per tile (begin · kLoraTile + rows - 1, the
                       // slot, the tile's kLoraTile tokens, the last repeated past rows)

  bool defined() const { return slots.defined(); }
};

// The tile of CUDA's tensor-core LoRA kernels: one block takes one tile, whose tokens share
// one adapter (cuda_lora_mma.cu). At most ⌈T / kLoraTile⌉ + (adapters in the step - 1) tiles.
constexpr int kLoraTile = 8;
constexpr int kLoraTileInts = 2 + kLoraTile;

// The step's embedding rows (engine/pooling.h, StepPlan::pool_index): the model puts the
// final hidden states of tokens `index` through its final norm and sums them run by run
// into `sums` (model/pooled_hidden.h). Undefined when no row of the step pools.
struct PoolTensors {
  Tensor index;   // [Q] i32: tokens (into T) whose final hidden state is pooled
  Tensor starts;  // [E+1] i32: run e is index[starts[e] .. starts[e+1])
  Tensor sums;    // [E, D] f32: written by the forward
  bool defined() const { return index.defined(); }
};

struct StepTensors {
  Tensor tokens;        // [T] i32
  Tensor positions;     // [T] i32: position of each token in its sequence
  Tensor seq_starts;    // [B+1] i32: row b owns tokens [seq_starts[b], seq_starts[b+1])
  Tensor context_lens;  // [B] i32: tokens of row b in the cache after this step
  Tensor sample_index;  // [S] i32: index (into T) of the token whose logits are returned
  // Undefined when no row of the step has an adapter (and the model is not recorded in a
  // graph, which reads them always).
  LoraRows lora;
  PoolTensors pool;  // undefined unless an embedding row pools this step
  // [S, V] f32: where the forward writes the logits (DecodeGraphs' one buffer, which every
  // batch-size bucket's graph writes a prefix of); undefined: the forward allocates them.
  Tensor logits_out;
  // Images (media/image_input.h). media_ends [T] i32: the end (one past the last position)
  // of the image whose soft tokens hold token t, or 0 for a token outside every image; an
  // image lies whole inside its row's context (the scheduler never splits one across
  // steps). Attention layers with AttentionParams::media_bidirectional let such a token
  // see the rest of its image. Undefined when no token of the step lies in an image.
  Tensor media_ends;
  // The soft tokens written over the placeholder embeddings (a model's forward copies
  // them in after its embedding lookup): rows [first_token, first_token + rows.dim(0)) of
  // the step's embeddings become `rows` ([n, D], the act dtype, on the device).
  struct MediaRows {
    int first_token = 0;
    Tensor rows;
  };
  std::vector<MediaRows> media;
  int num_tokens = 0;
  int num_rows = 0;
  int max_context_len = 0;
  // The most tokens any row has (a graph's: its padded rows'), for choosing kernels on the
  // host, when every row of several tokens is a verify chunk (each of its tokens sampled);
  // 0 when unknown or when a row is a prompt chunk (the attention's route then does not
  // depend on which rows share the step: batched greedy equals solo).
  int max_row_tokens = 0;
  int block_size = 16;
  std::vector<KvGroupTensors> groups;  // [G]

  // The addresses of `cache`'s block space.
  const KvGroupTensors& kv(const PagedKv& cache) const { return groups.at(size_t(cache.group)); }
};

// The sizes a StepTensors is allocated for.
struct StepShape {
  int num_tokens = 0;   // T
  int num_rows = 0;     // B
  int num_samples = 0;  // S
  int block_size = 16;
  int max_context_len = 0;      // the longest row's context, or a capacity bound
  int max_row_tokens = 0;       // as StepTensors::max_row_tokens
  std::vector<int> max_blocks;  // [G] each group's table width
  bool lora = false;            // the LoraRows are allocated
};

// Device arrays of `shape`, uninitialized: the caller writes every entry it lets ops read.
StepTensors alloc_step_tensors(Backend& backend, const StepShape& shape);
// The same, zero-filled (block id 0 is the null block, safe to read).
StepTensors zeroed_step_tensors(Backend& backend, const StepShape& shape);

// The tokens of `slots` with an adapter (slot > 0), grouped by slot (LoraRows::order).
std::vector<int32_t> lora_row_order(std::span<const int32_t> slots);
// LoraRows::tiles for order's entries and their slots (order_slots, grouped by slot).
std::vector<int32_t> lora_tiles(std::span<const int32_t> order,
                                std::span<const int32_t> order_slots);
// Writes every array of `rows` for the tokens' `slots` ([T], 0 = no adapter).
void write_lora_rows(Backend& backend, LoraRows& rows, std::span<const int32_t> slots);

}  // namespace tandem
