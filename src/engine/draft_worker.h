// DraftWorker: the draft model of speculative decoding inside an executor (engine/
// executor.h: "a second model runner"; docs/DESIGN.md §4). It runs a DraftStep
// (engine/draft_step.h) on the executor's backend — the first forward, then one forward
// per further proposal, each sampling every row still proposing and feeding those tokens
// to the next forward on the device — and keeps the logits its proposals were drawn from,
// for the verify step's sampling op (SampleRow::draft). Its K/V storage is indexed by the
// target's block ids of one KV group (KvLayout::draft_group).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/draft_step.h"
#include "engine/model_runner.h"
#include "kv/kv_groups.h"
#include "model/model.h"

namespace tandem {

class DraftWorker {
 public:
  // Throws tandem::Error when the draft cannot propose for `target`: another vocabulary.
  DraftWorker(std::unique_ptr<Model> draft, Backend& backend, const ModelConfig& target);

  const Model& model() const { return *model_; }
  // The target group whose block ids the draft's K/V uses: the full-attention group when
  // there is one (the draft keeps every block), else the widest window.
  static int table_group(const KvGroups& target_groups);
  int num_groups() const;
  // Bytes the draft's K/V adds to each block id of the table group.
  int64_t bytes_per_block(int block_size, DType dtype) const;
  // Its K/V storage: `num_blocks` blocks of the table group's ids. Once.
  void allocate(int num_blocks, int block_size, DType dtype);
  void prepare(int max_model_len, int max_rows, bool graphs);
  int64_t graphs_recorded() const { return runner_ ? runner_->graphs_recorded() : 0; }
  void record_verify_graphs(int rows, int max_tokens_per_row) {
    if (runner_) runner_->record_verify_graphs(rows, max_tokens_per_row);
  }

  // Runs `step` (the first forward's fed tokens, if any, from `prev`: the target's latest
  // sampling op) and waits for the proposals.
  DraftProposals run(const DraftStep& step, const PendingSample* prev);
  // The logits the proposals of the latest run were drawn from ([Q, vocab] f32; q_rows
  // index them), until taken; null when that run proposed nothing.
  std::optional<Tensor> take_logits() { return std::exchange(logits_, std::nullopt); }
  void reset() { logits_.reset(); }

 private:
  std::unique_ptr<Model> model_;
  Backend& backend_;
  std::unique_ptr<ModelRunner> runner_;
  std::optional<Tensor> logits_;
};

}  // namespace tandem
