// Engine: the loop that owns the model, the KV cache and every sequence (DESIGN.md §1).
// Each step: take new requests, drop cancelled ones, plan (Scheduler), run one batched
// forward (ModelRunner), sample each row, detokenize, apply stop rules, emit, and free
// the blocks of rows that finished. `--batch 1` is the same loop with one row per step.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "engine/engine_api.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "kv/block_pool.h"
#include "model/model.h"

namespace tandem {

class Tokenizer;

struct EngineConfig {
  SchedulerConfig scheduler;
  int64_t kv_budget_bytes = 0;  // 0: enough blocks for max_model_len × max_rows
  int max_model_len = 0;        // 0: the model's max_position_embeddings
  std::string served_model_name;
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
  const BlockPool& pool() const { return pool_; }

 private:
  void take_inbox();
  void admit(std::shared_ptr<Sequence> seq);
  void drop_cancelled();
  void emit_token(Sequence& seq, const GeneratedToken& token);
  void finish(Sequence& seq, FinishReason reason);
  bool should_stop(Sequence& seq, int32_t token) const;

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  EngineConfig config_;
  ModelInfo info_;
  BlockPool pool_;
  std::unique_ptr<ModelRunner> runner_;
  Scheduler scheduler_;

  mutable std::mutex inbox_mu_;
  std::vector<std::shared_ptr<Sequence>> inbox_;
  std::vector<std::shared_ptr<Sequence>> live_;  // owned by the engine thread
  int64_t next_id_ = 1;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{true};
  mutable std::mutex stats_mu_;
  EngineStats stats_;
};

// Blocks for a KV budget in bytes (at least enough for one full-length sequence when
// budget is 0).
int plan_num_blocks(const Model& model, int block_size, DType dtype, int64_t budget_bytes,
                    int max_model_len, int max_rows);

}  // namespace tandem
