// Engine: the loop that owns the model, the KV cache and every sequence (DESIGN.md §1).
// Each step: take new requests, drop cancelled ones, plan (Scheduler), run one batched
// forward (ModelRunner), sample each row, detokenize, apply stop rules, emit, and free
// the blocks of rows that finished. `--batch 1` is the same loop with one row per step.
//
// Overlap (on the GPU): step n+1 is planned and issued before step n's tokens are read.
// A token still on the device sits in its sequence as kPendingToken; the next step's
// plan feeds it from the device (StepPlan::feed_index), so the host never waits for the
// GPU except to read tokens, and the GPU never waits for the host. A sequence that stops
// on a token of step n has already been given a row in step n+1: that row's token is
// dropped (its KV writes land in blocks freed after, reused only by later steps on the
// same stream). A sequence whose last allowed token is in flight gets no further rows.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "engine/engine_api.h"
#include "engine/kv_layout.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "kv/kv_block_manager.h"
#include "model/model.h"

namespace tandem {

class Tokenizer;

struct EngineConfig {
  SchedulerConfig scheduler;
  int64_t kv_budget_bytes = 0;  // 0: enough blocks for max_model_len × max_rows
  int max_model_len = 0;        // 0: the model's max_position_embeddings
  // Element type of the KV cache (kv_cache_dtype_from_name); nullopt: the backend's
  // act dtype. F8E4M3 holds 2× (vs bf16) / 4× (vs f32) the tokens in the same bytes.
  std::optional<DType> kv_dtype;
  std::string served_model_name;
  bool graphs = true;  // decode steps as recorded graphs, where the backend has them
  // Issue step n+1 before reading step n's tokens (the host plans while the device runs):
  // 1 on, 0 off, -1 on where the backend runs asynchronously (not on the CPU, where it
  // would only delay each token by a step).
  int overlap = -1;
};

class Engine : public EngineApi {
 public:
  // `tokenizer` may be null (token ids in, token ids out, no text).
  Engine(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model,
         std::shared_ptr<const Tokenizer> tokenizer, EngineConfig config);
  ~Engine() override;

  std::shared_ptr<RequestStream> submit(GenerationRequest request) override;
  EngineStats stats() const override;
  const ModelInfo& model_info() const override { return info_; }

  // Runs the loop on its own thread until stop(); stop() lets running requests finish
  // when `drain` is set, else cancels them.
  void start();
  void stop(bool drain = true);
  // One iteration on the calling thread; false when there was nothing to do.
  bool step();
  // Steps until every submitted request has finished (the CLI's serial path).
  void run_until_idle();

  const Model& model() const { return *model_; }
  // The KV block pools of every group; num_used/num_free/capacity add the groups up.
  const KvBlockManager& pool() const { return kv_; }
  // The element type the KV cache is stored in.
  DType kv_dtype() const { return runner_->kv_dtype(); }

 private:
  void take_inbox();
  void admit(std::shared_ptr<Sequence> seq);
  void drop_cancelled();
  // A step whose sampled tokens are still on their way to the host.
  struct InFlight {
    PendingSample sample;
    std::vector<std::shared_ptr<Sequence>> seqs;  // [S] the sequence of each sampled row
    std::vector<int> token_index;                 // [S] where its placeholder token sits
    bool needs_history = false;  // a row samples with penalties, which read every token
  };
  // Plans `rows` into one forward and its sampling op, issued without waiting.
  std::optional<InFlight> issue(const std::vector<ScheduledRow>& rows);
  // Waits for the in-flight step's tokens and emits them.
  void complete_in_flight();
  void fail_running(const std::string& why);
  void emit_token(Sequence& seq, int index, const GeneratedToken& token);
  void finish(Sequence& seq, FinishReason reason);
  bool should_stop(const Sequence& seq, int generated, int32_t token) const;
  void wait_for_work();

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  EngineConfig config_;
  ModelInfo info_;
  KvBlockManager kv_;
  std::unique_ptr<ModelRunner> runner_;
  Scheduler scheduler_;
  bool overlap_ = false;
  std::optional<InFlight> in_flight_;  // owned by the engine thread

  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;  // signalled by submit() and stop()
  std::vector<std::shared_ptr<Sequence>> inbox_;
  std::vector<std::shared_ptr<Sequence>> live_;  // owned by the engine thread
  int64_t next_id_ = 1;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{true};
  mutable std::mutex stats_mu_;
  EngineStats stats_;
};

// The KV sizing an engine config asks for (kv/kv_budget.h): the byte budget, the rows,
// the step's token budget and the context length (the model's when the config has none).
KvSizing kv_sizing(const Model& model, const EngineConfig& config);

}  // namespace tandem
