// DecodeGraphs: decode steps (every row one new token, sampled) replayed as recorded
// graphs on backends that have them (CUDA), one graph per batch-size bucket. A step of B
// rows runs the graph of the smallest bucket ≥ B; the extra rows are padding that writes
// no KV (slot −1) and reads only the null block. Each graph reads its inputs from device
// arrays of fixed address and capacity (block tables of `max_blocks` columns, context
// bounds of max_blocks × block_size), which the runner rewrites before each replay (of
// the block tables only the columns the step's rows use). A model with LoRA adapters has
// two graphs per bucket: one with the adapters' kernels, for steps where a row uses one,
// and one without, so steps of base-model rows pay nothing for adapters they do not use.
// The base-model graphs are all recorded at start (record_all, as vLLM captures its graphs
// at start-up): a graph recorded on first use stalls every row of that step for the
// recording (20–35 ms on the 8B shape), once per bucket in a server's first minutes under
// load. The adapters' graphs, which only adapter requests take, are recorded on first use.
// Every graph writes its logits into the first rows of one buffer (StepTensors::logits_out):
// on the 8B shape at 256 rows the 18 graphs hold 282 MiB instead of 878 (an H100's
// nvidia-smi, a server with graphs against one without).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/step_plan.h"
#include "model/model.h"

namespace tandem {

class DecodeGraphs {
 public:
  // `kv` is the runner's; `max_blocks` bounds every group's table width.
  DecodeGraphs(Model& model, Backend& backend, std::span<PagedKv> kv, int num_groups,
               int block_size, int max_blocks, int max_rows);

  // True when `plan` is a decode step that one of the buckets can run.
  bool fits(const StepPlan& plan) const;
  // Records every bucket's base-model graph not recorded yet.
  void record_all();
  // Runs the plan through its bucket's graph (recorded on first use). Logits [B, vocab].
  // `prev`: the previous step's sampling op, for the plan's fed tokens.
  Tensor run(const StepPlan& plan, const PendingSample* prev = nullptr);
  // Graphs recorded so far (a step that records one costs far more than its replays).
  int64_t recorded() const { return recorded_; }

 private:
  struct Graph {
    int rows = 0;
    StepTensors step;  // the device arrays the recording reads
    Tensor logits;     // [rows, vocab]: logits_'s first rows, written by every replay
    std::shared_ptr<void> exec;
  };
  Graph record(int rows, bool lora);
  void write_inputs(Graph& g, const StepPlan& plan);

  Model& model_;
  Backend& backend_;
  std::span<PagedKv> kv_;
  int num_groups_;
  int block_size_;
  int max_blocks_;
  std::vector<int> buckets_;
  // [bucket] without adapters, then [buckets_.size() + bucket] with them (LoRA models only);
  // rows == 0 until recorded
  std::vector<Graph> graphs_;
  // [largest bucket, vocab] f32: every graph's logits, in its first rows (record_step), so
  // the buckets' logits take one bucket's memory, not the sum of all 18 (5.7x).
  Tensor logits_;
  int64_t recorded_ = 0;
};

}  // namespace tandem
