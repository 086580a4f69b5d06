#include "engine/draft_worker.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "engine/kv_layout.h"
#include "model/config.h"

namespace tandem {

DraftWorker::DraftWorker(std::unique_ptr<Model> draft, Backend& backend, const ModelConfig& target)
    : model_(std::move(draft)), backend_(backend) {
  const ModelConfig& c = model_->config();
  if (c.vocab_size != target.vocab_size)
    fail(
        "--speculative-config: the draft model has a vocabulary of {} tokens, the model {}: "
        "a draft must share the model's tokenizer",
        c.vocab_size, target.vocab_size);
}

int DraftWorker::table_group(const KvGroups& target_groups) {
  // Groups list the full-attention one first, then windows ascending (kv_groups.h).
  return target_groups.groups[0].window == 0 ? 0 : target_groups.num_groups() - 1;
}

int DraftWorker::num_groups() const {
  return kv_groups_of(model_->kv_specs()).num_groups();
}

int64_t DraftWorker::bytes_per_block(int block_size, DType dtype) const {
  return kv_bytes_per_block(model_->kv_specs(), block_size, dtype);
}

void DraftWorker::allocate(int num_blocks, int block_size, DType dtype) {
  TANDEM_CHECK(!runner_, "the draft's KV cache is allocated already");
  runner_ = std::make_unique<ModelRunner>(*model_, backend_, num_blocks, block_size, dtype);
}

void DraftWorker::prepare(int max_model_len, int max_rows, bool graphs) {
  TANDEM_CHECK(runner_, "prepare the draft after allocating its KV cache");
  if (graphs) runner_->enable_graphs(max_model_len, max_rows);
}

DraftProposals DraftWorker::run(const DraftStep& step, const PendingSample* prev) {
  TANDEM_CHECK(runner_, "run_draft: the draft's KV cache is not allocated");
  logits_.reset();
  const int rows = int(step.rows.size()), max_k = step.max_proposals();
  int total = 0;  // draft logits rows: one per proposal
  for (const DraftRow& r : step.rows) total += r.num_proposals();
  const int64_t vocab = model_->config().vocab_size;
  Tensor all = backend_.alloc(DType::F32, {std::max(total, 1), vocab});
  DraftProposals out{std::vector<std::vector<int32_t>>(size_t(rows)),
                     std::vector<std::vector<int32_t>>(size_t(rows))};
  std::vector<PendingSample> pending;
  std::vector<std::vector<size_t>> sampled_rows(size_t(std::max(max_k, 1)));  // [j] → rows
  int at = 0;  // next free row of `all`
  Tensor logits = runner_->forward(step.first, prev);
  for (int j = 0; j < max_k; j++) {
    std::vector<SampleRow> draws;
    std::vector<int32_t> feed;  // forward j + 1's rows, fed from this op's rows
    for (size_t r = 0; r < size_t(rows); r++)
      if (step.rows[r].num_proposals() > j) {
        sampled_rows[size_t(j)].push_back(r);
        draws.push_back(step.rows[r].draws[size_t(j)]);
        out.q_rows[r].push_back(at + int(draws.size()) - 1);
        if (step.rows[r].num_proposals() > j + 1) feed.push_back(int32_t(draws.size()) - 1);
      }
    if (j == 0) {  // the first forward samples its proposing rows at their sample_index
      TANDEM_CHECK(int(step.first.sample_index.size()) == rows,
                   "draft: {} sampled rows for {} proposing", step.first.sample_index.size(), rows);
    }
    Tensor view = all.slice_rows(at, int64_t(draws.size()));
    backend_.copy(view, logits);  // kept for the verify step (q), before sampling
    at += int(draws.size());
    pending.push_back(backend_.sample_async(logits, draws));
    if (j + 1 < max_k) {
      const StepPlan next =
          draft_decode_plan(step.rows, j + 1, feed, num_groups(), step.first.block_size);
      logits = runner_->forward(next, &pending.back());
    }
  }
  for (int j = 0; j < int(pending.size()); j++) {
    std::vector<SampledToken> picked(sampled_rows[size_t(j)].size());
    backend_.sample_wait(pending[size_t(j)], picked);
    for (size_t i = 0; i < picked.size(); i++)
      out.tokens[sampled_rows[size_t(j)][i]].push_back(picked[i].token);
  }
  if (total > 0) logits_ = std::move(all);
  return out;
}

}  // namespace tandem
