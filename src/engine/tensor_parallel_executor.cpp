// The tensor-parallel Executor (engine/tensor_parallel_executor.h).
#include "engine/tensor_parallel_executor.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <iterator>
#include <utility>

#include "core/error.h"
#include "engine/draft_worker.h"
#include "engine/kv_layout.h"
#include "engine/model_runner.h"
#include "engine/pooling_step.h"
#include "engine/sampler.h"
#include "model/config.h"

namespace tandem {
namespace {

class TensorParallelExecutor final : public Executor {
 public:
  TensorParallelExecutor(std::unique_ptr<Backend> backend0, std::unique_ptr<Model> model0,
                         std::shared_ptr<TpRanks> ranks, ExecutorConfig config,
                         std::unique_ptr<Model> draft, TpExecutorOptions options)
      : backend0_(std::move(backend0)),
        model0_(std::move(model0)),
        ranks_(std::move(ranks)),
        config_(config),
        broadcast_(ranks_->size() > 1 || options.broadcast_at_one_rank),
        fed_(size_t(ranks_->size())) {
    TANDEM_CHECK(&ranks_->model(0) == model0_.get() && &ranks_->backend(0) == backend0_.get(),
                 "tensor-parallel executor: rank 0 is not the group's");
    info_.model = std::make_shared<const ModelConfig>(model0_->config());
    for (int r = 0; r < ranks_->size(); r++)
      info_.num_parameters += ranks_->model(r).num_parameters();
    info_.act_dtype = backend0_->act_dtype();
    info_.device = backend0_->name();
    // The overlap pays where the ranks' devices run beside the host (executor.h's Overlap);
    // CPU ranks share the host's cores with the engine, as the single worker's CPU does.
    info_.asynchronous = backend0_->device() != Device::CPU;
    info_.vision = model0_->vision_spec();
    if (draft) {  // whole, on rank 0's backend (tensor_parallel_executor.h)
      draft_ = std::make_unique<DraftWorker>(std::move(draft), *backend0_, *info_.model);
      info_.draft = std::make_shared<const ModelConfig>(draft_->model().config());
      info_.draft_num_parameters = draft_->model().num_parameters();
    }
  }

  // The rank threads' jobs read this executor's members: none may outlive it.
  ~TensorParallelExecutor() override {
    try {
      ranks_->drain();
    } catch (...) {  // a step's error nobody collected: nothing is left to report it to
    }
  }
  TensorParallelExecutor(const TensorParallelExecutor&) = delete;
  TensorParallelExecutor& operator=(const TensorParallelExecutor&) = delete;

  const ExecutorInfo& info() const override { return info_; }

  KvRoom kv_room(const KvSizing& sizing) const override {
    const DType dtype = config_.kv_dtype.value_or(backend0_->act_dtype());
    int64_t per_block = kv_bytes_per_block(model0_->kv_specs(), sizing.block_size, dtype);
    if (draft_) per_block += draft_->bytes_per_block(sizing.block_size, dtype);
    return {.bytes_available = spare_bytes(sizing),
            .bytes_per_token = per_block / sizing.block_size};
  }

  KvLayout allocate_kv(const KvSizing& sizing) override;

  void prepare(int max_model_len, int max_rows) override {
    TANDEM_CHECK(!runners_.empty(), "prepare: allocate_kv first");
    if (config_.graphs)  // each rank records its own graphs, on its own thread and device
      ranks_->run([&](int r) { runners_[size_t(r)]->enable_graphs(max_model_len, max_rows); });
    recorded0_ = runners_[0]->graphs_recorded();  // the decode graphs, recorded now
    if (draft_) draft_->prepare(max_model_len, max_rows, config_.graphs);
  }

  // As the single worker: a speculating engine's one-row verify graphs, recorded at start-up
  // by each rank on its own thread and device, the collectives inside them (every rank
  // records the same graphs in the same order, so they meet in the same collectives).
  void prepare_speculation(int tokens_per_row) override {
    if (!config_.graphs || !config_.verify_graphs) return;
    ranks_->run([&](int r) { runners_[size_t(r)]->record_verify_graphs(1, tokens_per_row); });
    recorded0_ = runners_[0]->graphs_recorded();
    if (draft_) draft_->record_verify_graphs(1, tokens_per_row);
  }
  // Rank 0's graphs (decode and verify) as of its latest forward (every rank records the
  // same ones), and the draft's. A step that records one lazily is counted once rank 0 has
  // run it: with the steps overlapped, possibly after the engine has looked (a statistic,
  // not a result).
  int64_t graphs_recorded() const override {
    return recorded0_.load(std::memory_order_relaxed) + (draft_ ? draft_->graphs_recorded() : 0);
  }

  void issue_forward(const StepPlan& plan) override;
  void issue_sampling(std::span<const SampleRow> rows) override;

  std::vector<GeneratedToken> take_prompt_logprobs() override {
    return std::exchange(prompt_logprobs_, {});
  }
  std::vector<std::vector<float>> take_pooled() override { return std::exchange(pooled_, {}); }

  std::vector<SampledToken> collect() override;

  // Waits for the steps in flight (their errors are the failed step's, already reported or
  // forgotten with it), then forgets them on the caller's and on the ranks' side.
  void reset() override {
    try {
      ranks_->drain();
    } catch (...) {
    }
    steps_.clear();
    to_sample_ = false;
    prompt_logprobs_.clear();
    pooled_.clear();
    logits0_.reset();  // the ranks are idle: their state may be touched here
    pending0_.clear();
    for (PendingSample& fed : fed_) fed = {};
    if (draft_) draft_->reset();
  }

  // The draft runs here, on rank 0's backend, once the ranks are idle (its device is theirs
  // and its first forward feeds rank 0's latest sampled ids, from the op on the device).
  DraftProposals run_draft(const DraftStep& step) override {
    TANDEM_CHECK(draft_, "run_draft: no draft model");
    ranks_->drain();
    return draft_->run(step, pending0_.empty() ? nullptr : &pending0_.back());
  }

  // An adapter is cut like its base weights: each rank's image fits its own targets
  // (model/lora/lora_slots.h). The image holds the ranks' images one after another.
  LoraSlotImage lora_image(const PeftAdapter& adapter) const override {
    LoraSlotImage all;
    for (int r = 0; r < ranks_->size(); r++) {
      LoraSlotImage mine = lora_slot_image(ranks_->model(r).lora_targets(), adapter);
      std::move(mine.a.begin(), mine.a.end(), std::back_inserter(all.a));
      std::move(mine.b.begin(), mine.b.end(), std::back_inserter(all.b));
    }
    return all;
  }
  void install_lora(int slot, const LoraSlotImage& image) override {
    std::vector<LoraSlotImage> mine(size_t(ranks_->size()));
    size_t at = 0;
    for (int r = 0; r < ranks_->size(); r++) {
      const LoraTargets& targets = ranks_->model(r).lora_targets();
      const size_t n = targets.targets.size();
      TANDEM_CHECK(at + n <= image.a.size() && at + n <= image.b.size(),
                   "install_lora: an image of {} targets for {} ranks", image.a.size(),
                   ranks_->size());
      mine[size_t(r)] = {.a = {image.a.begin() + long(at), image.a.begin() + long(at + n)},
                         .b = {image.b.begin() + long(at), image.b.begin() + long(at + n)}};
      at += n;
    }
    // On each rank's thread (its device), after the steps issued; waits, so that an adapter
    // that fails to install is reported to the install, not to a later step.
    ranks_->run([&](int r) {
      install_lora_slot(ranks_->backend(r), ranks_->model(r).lora_targets(), slot, mine[size_t(r)]);
    });
  }

 private:
  // One step's sampling, from issue_sampling to collect. The rank threads write it; the
  // caller reads it once ranks_->wait(job) has returned.
  struct Sampled {
    uint64_t job = 0;                  // collect's job (TpRanks::post)
    std::vector<SampledToken> tokens;  // rank 0's
    bool done = false;                 // rank 0 waited for them (false: skipped after an error)
  };
  // What a forward read back for the caller: rank 0's prompt logprobs and pooled runs.
  struct ReadBack {
    std::vector<GeneratedToken> prompt_logprobs;
    std::vector<std::vector<float>> pooled;
  };
  // The sampling rows as the job keeps them: the grammar masks copied (SampleRow::allowed
  // points at the engine's memory, valid only until issue_sampling returns).
  struct Rows {
    std::vector<SampleRow> rows;
    std::vector<std::vector<uint32_t>> masks;
  };
  void forward_on_rank(int r, const StepPlan& plan, ReadBack& out);
  void sample_on_rank(int r, const Rows& rows, std::optional<Tensor> q);
  // What rank r's fed tokens are read from: its copy of the latest broadcast ids, or (one
  // rank, no broadcast) rank 0's latest sampling op. On rank r's thread.
  const PendingSample* feed_source(int r) const {
    if (!broadcast_) return pending0_.empty() ? nullptr : &pending0_.back();
    return fed_[size_t(r)].state ? &fed_[size_t(r)] : nullptr;
  }

  // What one rank's device spares for its KV cache. CPU ranks share this machine's RAM: a
  // quarter of it split N ways. GPU ranks: the least any rank's GPU spares (each asked on
  // its own thread, its device current).
  int64_t spare_bytes(const KvSizing& sizing) const {
    if (backend0_->device() == Device::CPU)
      return backend0_->available_memory() / 4 / ranks_->size();
    std::vector<int64_t> spare(size_t(ranks_->size()));
    ranks_->run([&](int r) {
      spare[size_t(r)] = spare_kv_bytes(ranks_->backend(r), *info_.model, sizing);
    });
    return *std::min_element(spare.begin(), spare.end());
  }

  std::unique_ptr<Backend> backend0_;
  std::unique_ptr<Model> model0_;
  std::shared_ptr<TpRanks> ranks_;
  ExecutorConfig config_;
  ExecutorInfo info_;
  std::vector<std::unique_ptr<ModelRunner>> runners_;  // [N], from allocate_kv on
  // The caller's side.
  std::deque<std::shared_ptr<Sampled>> steps_;  // sampled steps not collected yet, oldest first
  bool to_sample_ = false;                      // the forward issued last has logits to sample
  std::vector<GeneratedToken> prompt_logprobs_;
  std::vector<std::vector<float>> pooled_;
  std::unique_ptr<DraftWorker> draft_;  // speculative decoding's draft model, on rank 0
  // The ranks' side: fed_[r] only on rank r's thread, logits0_ and pending0_ only on rank
  // 0's (or here, while the ranks are idle after a drain).
  const bool broadcast_;                // the sampled ids are broadcast (N ≥ 2, or the test hook)
  std::vector<PendingSample> fed_;      // [N] rank r's copy of the latest broadcast ids
  std::optional<Tensor> logits0_;       // rank 0's of the forward issued last
  std::deque<PendingSample> pending0_;  // rank 0's sampling ops not waited for, oldest first
  std::atomic<int64_t> recorded0_{0};   // rank 0's graphs recorded (any thread reads)
};

KvLayout TensorParallelExecutor::allocate_kv(const KvSizing& sizing) {
  TANDEM_CHECK(runners_.empty(), "allocate_kv: the KV cache is allocated already");
  // Every rank has the same KV geometry (its share of the heads), so one layout serves all.
  const std::vector<LayerKvSpec> specs = model0_->kv_specs();
  KvLayout layout;
  layout.dtype = config_.kv_dtype.value_or(backend0_->act_dtype());
  layout.groups = kv_groups_of(specs);
  std::vector<int64_t> block_bytes =
      group_block_bytes(specs, layout.groups, sizing.block_size, layout.dtype);
  if (draft_) {  // the draft's K/V rides in rank 0's blocks of one group (draft_worker.h)
    layout.draft_group = DraftWorker::table_group(layout.groups);
    layout.draft_num_groups = draft_->num_groups();
    block_bytes[size_t(*layout.draft_group)] +=
        draft_->bytes_per_block(sizing.block_size, layout.dtype);
  }
  KvSizing s = sizing;
  if (!s.budget_bytes) {
    const int64_t want = kv_bytes(plan_group_blocks(layout.groups, block_bytes, s), block_bytes);
    const int64_t two_blocks = 2 * kv_bytes_per_block(specs, s.block_size, layout.dtype);
    const int64_t spare = spare_bytes(s);
    if (spare < want) s.budget_bytes = std::max(spare, two_blocks);
  }
  layout.num_blocks = plan_group_blocks(layout.groups, block_bytes, s);
  layout.bytes = kv_bytes(layout.num_blocks, block_bytes);
  layout.budget_bytes = s.budget_bytes.value_or(layout.bytes);
  std::vector<std::unique_ptr<ModelRunner>> runners(size_t(ranks_->size()));
  ranks_->run([&](int r) {  // each rank's cache on its own device
    runners[size_t(r)] = std::make_unique<ModelRunner>(
        ranks_->model(r), ranks_->backend(r), layout.num_blocks, s.block_size, layout.dtype);
    runners[size_t(r)]->set_encoder_cache_bytes(config_.encoder_cache_bytes);
  });
  runners_ = std::move(runners);
  if (draft_)
    draft_->allocate(layout.num_blocks[size_t(*layout.draft_group)], s.block_size, layout.dtype);
  return layout;
}

void TensorParallelExecutor::issue_forward(const StepPlan& plan) {
  TANDEM_CHECK(!runners_.empty(), "issue: allocate_kv first");
  TANDEM_CHECK(!to_sample_, "issue: the previous step's logits were never sampled");
  prompt_logprobs_.clear();
  pooled_.clear();
  // Prompt logprobs ride in the same forward: their rows first, the sampled rows after.
  auto run = std::make_shared<StepPlan>(plan);
  if (!plan.logprob_index.empty()) {
    run->sample_index = plan.logprob_index;
    run->sample_index.insert(run->sample_index.end(), plan.sample_index.begin(),
                             plan.sample_index.end());
  }
  auto out = std::make_shared<ReadBack>();
  const uint64_t job = ranks_->post([this, run, out](int r) { forward_on_rank(r, *run, *out); });
  to_sample_ = !plan.sample_index.empty();
  // Only the steps that read rows back wait for the ranks (executor.h).
  if (plan.logprob_index.empty() && plan.pool_index.empty()) return;
  ranks_->wait(job);
  prompt_logprobs_ = std::move(out->prompt_logprobs);
  pooled_ = std::move(out->pooled);
}

// On rank r's thread. The fed tokens are the ids the sampling job before this one broadcast
// (fed_[r], written on this same thread), written on rank r's device, so every rank feeds
// the same tokens; one rank reads them from its latest sampling op, as the single worker.
void TensorParallelExecutor::forward_on_rank(int r, const StepPlan& plan, ReadBack& out) {
  Tensor pooled;
  Tensor logits = runners_[size_t(r)]->forward(plan, feed_source(r), &pooled);
  if (r != 0) return;
  recorded0_.store(runners_[0]->graphs_recorded(), std::memory_order_relaxed);
  const int64_t num_prompt_rows = int64_t(plan.logprob_index.size());
  const int64_t num_sampled = int64_t(plan.sample_index.size()) - num_prompt_rows;
  if (num_prompt_rows > 0)
    out.prompt_logprobs =
        score_prompt_rows(*backend0_, logits.slice_rows(0, num_prompt_rows), plan);
  logits0_.reset();
  if (num_sampled > 0) logits0_ = logits.slice_rows(num_prompt_rows, num_sampled);
  if (pooled.defined()) out.pooled = pooled_runs_to_host(*backend0_, pooled);
}

void TensorParallelExecutor::issue_sampling(std::span<const SampleRow> rows) {
  TANDEM_CHECK(to_sample_, "issue_sampling: no forward waits to be sampled");
  to_sample_ = false;
  auto kept = std::make_shared<Rows>();
  kept->rows.assign(rows.begin(), rows.end());
  kept->masks.resize(rows.size());
  for (size_t i = 0; i < rows.size(); i++) {
    kept->masks[i].assign(rows[i].allowed.begin(), rows[i].allowed.end());
    kept->rows[i].allowed = kept->masks[i];
  }
  // Proposals the draft model drew are checked against the logits it drew them from. Rank 0
  // takes them (rank 0's device memory is let go on rank 0's thread, never on another rank's).
  auto q = std::make_shared<std::optional<Tensor>>(draft_ ? draft_->take_logits() : std::nullopt);
  ranks_->post([this, kept, q](int r) {
    sample_on_rank(r, *kept, r == 0 ? std::exchange(*q, std::nullopt) : std::nullopt);
  });
  steps_.push_back(std::make_shared<Sampled>());
}

// On rank r's thread, waiting for nothing: rank 0 issues its sampling op (waited for in
// collect's job, after the steps issued since) and the broadcast of its picked ids; rank r
// receives them into a tensor of its own device, kept for the next forward's fed tokens.
void TensorParallelExecutor::sample_on_rank(int r, const Rows& rows, std::optional<Tensor> q) {
  Backend& backend = ranks_->backend(r);
  Tensor ids;
  if (r == 0) {
    TANDEM_CHECK(logits0_, "issue_sampling: rank 0 has no logits to sample");
    Tensor logits = std::move(*logits0_);
    logits0_.reset();
    PendingSample pending = backend0_->sample_async(logits, rows.rows, q ? &*q : nullptr);
    TANDEM_CHECK(size_t(pending.num_rows) == rows.rows.size(),
                 "tensor parallelism: {} sampling rows gave {} tokens", rows.rows.size(),
                 pending.num_rows);
    if (broadcast_) ids = backend0_->sampled_ids(pending);
    pending0_.push_back(std::move(pending));
  } else {
    ids = backend.alloc(DType::I32, {int64_t(rows.rows.size())});
  }
  if (!broadcast_) return;
  if (ids.numel() > 0) ranks_->comm(r).broadcast_ids(ids, 0);
  fed_[size_t(r)] = backend.picked_ids(std::move(ids));
}

std::vector<SampledToken> TensorParallelExecutor::collect() {
  TANDEM_CHECK(!steps_.empty(), "collect: no step in flight");
  const std::shared_ptr<Sampled> step = std::move(steps_.front());
  steps_.pop_front();
  // Rank 0 waits for its sampling op after the jobs posted before this one (the other ranks
  // have nothing to do here: the host's ids are rank 0's).
  step->job = ranks_->post([this, step](int r) {
    if (r != 0) return;
    TANDEM_CHECK(!pending0_.empty(), "collect: the step's sampling never ran");
    PendingSample pending = std::move(pending0_.front());
    pending0_.pop_front();
    step->tokens.resize(size_t(pending.num_rows));
    backend0_->sample_wait(pending, step->tokens);
    step->done = true;
  });
  ranks_->wait(step->job);  // rethrows the error of a failed job, this step's or an earlier one
  TANDEM_CHECK(step->done, "collect: the step was dropped after an earlier step failed");
  return std::move(step->tokens);
}

}  // namespace

std::unique_ptr<Executor> make_tensor_parallel_executor(std::unique_ptr<Backend> backend0,
                                                        std::unique_ptr<Model> model0,
                                                        std::shared_ptr<TpRanks> ranks,
                                                        ExecutorConfig config,
                                                        std::unique_ptr<Model> draft,
                                                        TpExecutorOptions options) {
  return std::make_unique<TensorParallelExecutor>(
      std::move(backend0), std::move(model0), std::move(ranks), config, std::move(draft), options);
}

}  // namespace tandem
