// ModelRunner: executes a StepPlan through the model on the backend. It owns the KV
// storage (one PagedKv per layer that stores KV, [num_blocks of its group, ...]) and the
// step's device-side arrays, one slot map and block table per KV group.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/decode_graphs.h"
#include "engine/encoder_cache.h"
#include "engine/step_plan.h"
#include "engine/verify_graphs.h"
#include "kv/kv_groups.h"
#include "model/model.h"

namespace tandem {

class ModelRunner {
 public:
  // num_blocks [G]: blocks of each KV group (engine/kv_layout.h), null blocks included.
  // The caches hold `kv_dtype` (default: the backend's act dtype); fails when the backend
  // cannot store that dtype.
  ModelRunner(Model& model, Backend& backend, std::span<const int> num_blocks, int block_size,
              std::optional<DType> kv_dtype = std::nullopt);
  // Every group with `num_blocks` blocks (one sequence, no budget: teacher forcing, tests).
  ModelRunner(Model& model, Backend& backend, int num_blocks, int block_size,
              std::optional<DType> kv_dtype = std::nullopt);

  // A plan's images are encoded (Model::encode_images) when their soft tokens are not in
  // the encoder cache, which holds at most this many bytes (default 256 MiB).
  void set_encoder_cache_bytes(int64_t bytes) { encoder_cache_ = EncoderCache(backend_, bytes); }
  const EncoderCache& encoder_cache() const { return encoder_cache_; }
  EncoderCache& encoder_cache() { return encoder_cache_; }

  // Logits of the plan's sample_index tokens, on the device: [S, vocab] in the backend's
  // act dtype ([1, vocab], unread, when the plan samples nothing). They stay there for
  // the sampling op; callers that want host values use backend.to_host_f32().
  // `prev` is the previous step's sampling op, read for the plan's fed tokens. When the
  // plan pools (StepPlan::pool_index), `pooled` gets the runs' sums, [E, hidden] f32 on the
  // device (engine/pooling_step.h).
  Tensor forward(const StepPlan& plan, const PendingSample* prev = nullptr,
                 Tensor* pooled = nullptr);
  // On backends with graphs: run decode steps of up to `max_rows` rows as recorded graphs
  // (engine/decode_graphs.h), and steps of a few tokens per row (speculative verify steps,
  // engine/verify_graphs.h); `max_model_len` bounds the block tables they read. Records
  // the decode graphs now (DecodeGraphs::record_all): after allocate_kv.
  void enable_graphs(int max_model_len, int max_rows, bool verify = false);
  // Steps run through a verify graph so far, and graphs recorded, decode and verify (0
  // without graphs).
  int64_t verify_graph_replays() const { return verify_graphs_ ? verify_graphs_->replays() : 0; }
  int64_t graphs_recorded() const {
    return (graphs_ ? graphs_->recorded() : 0) + (verify_graphs_ ? verify_graphs_->recorded() : 0);
  }
  // Records the verify graphs of `rows` rows of 2..max_tokens_per_row tokens now
  // (VerifyGraphs::record_now), creating the verify graphs first: a speculating engine's
  // executor calls it at start-up (Executor::prepare_speculation). Without graphs enabled,
  // nothing.
  void record_verify_graphs(int rows, int max_tokens_per_row);

  const KvGroups& groups() const { return groups_; }
  int num_groups() const { return groups_.num_groups(); }
  int num_blocks(int group) const { return num_blocks_[size_t(group)]; }
  int block_size() const { return block_size_; }
  DType kv_dtype() const { return kv_dtype_; }

 private:
  StepTensors upload(const StepPlan& plan, const PendingSample* prev);
  // Creates the verify graphs (none recorded yet), once graphs are enabled.
  void make_verify_graphs();
  // The step's images: media_ends, and each image's soft tokens (StepTensors::media).
  void upload_media(StepTensors& step, const StepPlan& plan);

  Model& model_;
  Backend& backend_;
  KvGroups groups_;
  std::vector<int> num_blocks_;  // [G]
  int block_size_;
  DType kv_dtype_;           // of every cache tensor
  std::vector<PagedKv> kv_;  // [num_layers]
  std::unique_ptr<DecodeGraphs> graphs_;
  std::unique_ptr<VerifyGraphs> verify_graphs_;
  int graph_max_blocks_ = 0, graph_max_rows_ = 0;  // enable_graphs' bounds
  EncoderCache encoder_cache_;
};

// Writes the plan's fed tokens (StepPlan::feed_index) into the step's `tokens` on the
// device, reading the previous step's sampling op `prev`.
void feed_plan_tokens(Backend& backend, Tensor& tokens, const StepPlan& plan,
                      const PendingSample* prev);

// A step recorded as a graph (DecodeGraphs, VerifyGraphs): an eager warm-up (caches,
// kernels and GEMM choices ready), then the capture of the same forward. Both write their
// logits into the first `rows` rows of `shared` ([capacity_rows, vocab] f32, allocated by
// the first recording's warm-up), so all of a class's graphs take one buffer's memory, and
// no warm-up leaves a logits block of its own size in the allocator's cache. A step's
// logits are read (sampled, or copied) on the stream before the next replay writes them.
struct RecordedStep {
  Tensor logits;  // [rows, vocab]: shared's first rows
  std::shared_ptr<void> exec;
};
RecordedStep record_step(Model& model, Backend& backend, std::span<PagedKv> kv, StepTensors& step,
                         Tensor& shared, int64_t rows, int64_t capacity_rows);

}  // namespace tandem
