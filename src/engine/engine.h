// Engine: the loop that owns the model, the KV cache and every sequence (DESIGN.md §1).
// Each step: take new requests, drop cancelled ones, plan (Scheduler), run one batched
// forward (ModelRunner), sample each row, detokenize, apply stop rules, emit, and free
// the blocks of rows that finished. `--batch 1` is the same loop with one row per step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
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
  std::string served_model_name;
  bool graphs = true;  // decode steps as recorded graphs, where the backend has them
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

 private:
  void take_inbox();
  void admit(std::shared_ptr<Sequence> seq);
  void drop_cancelled();
  void emit_token(Sequence& seq, const GeneratedToken& token);
  void finish(Sequence& seq, FinishReason reason);
  bool should_stop(Sequence& seq, int32_t token) const;
  void wait_for_work();

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  EngineConfig config_;
  ModelInfo info_;
  KvBlockManager kv_;
  std::unique_ptr<ModelRunner> runner_;
  Scheduler scheduler_;

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
