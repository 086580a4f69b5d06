// The single-worker Executor (engine/executor.h): one backend, one model, its
// ModelRunner (KV storage, step uploads) and decode graphs, and the sampling ops in flight.
#include <algorithm>
#include <deque>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"
#include "engine/draft_worker.h"
#include "engine/executor.h"
#include "engine/kv_layout.h"
#include "engine/model_runner.h"
#include "engine/pooling_step.h"
#include "engine/sampler.h"
#include "model/config.h"

namespace tandem {
namespace {

class SingleWorkerExecutor final : public Executor {
 public:
  SingleWorkerExecutor(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model,
                       ExecutorConfig config, std::unique_ptr<Model> draft)
      : backend_(std::move(backend)), model_(std::move(model)), config_(config) {
    info_.model = std::make_shared<const ModelConfig>(model_->config());
    info_.num_parameters = model_->num_parameters();
    info_.act_dtype = backend_->act_dtype();
    info_.device = backend_->name();
    info_.asynchronous = backend_->device() != Device::CPU;
    if (draft) {
      draft_ = std::make_unique<DraftWorker>(std::move(draft), *backend_, *info_.model);
      info_.draft = std::make_shared<const ModelConfig>(draft_->model().config());
      info_.draft_num_parameters = draft_->model().num_parameters();
    }
    info_.vision = model_->vision_spec();
  }

  const ExecutorInfo& info() const override { return info_; }
  KvRoom kv_room(const KvSizing& sizing) const override;
  KvLayout allocate_kv(const KvSizing& sizing) override;
  void prepare(int max_model_len, int max_rows) override;
  // Verify graphs exist only in a speculating engine (a server without speculation keeps
  // its mixed steps eager): created and their one-row graphs recorded here, at start-up.
  void prepare_speculation(int tokens_per_row) override {
    if (!config_.graphs || !config_.verify_graphs) return;
    if (runner_) runner_->record_verify_graphs(1, tokens_per_row);
    if (draft_) draft_->record_verify_graphs(1, tokens_per_row);
  }
  int64_t graphs_recorded() const override {
    return (runner_ ? runner_->graphs_recorded() : 0) + (draft_ ? draft_->graphs_recorded() : 0);
  }
  void issue_forward(const StepPlan& plan) override;
  void issue_sampling(std::span<const SampleRow> rows) override;
  std::vector<SampledToken> collect() override;
  std::vector<GeneratedToken> take_prompt_logprobs() override {
    return std::exchange(prompt_logprobs_, {});
  }
  std::vector<std::vector<float>> take_pooled() override { return std::exchange(pooled_, {}); }
  void reset() override {
    pending_.clear();
    logits_.reset();
    prompt_logprobs_.clear();
    pooled_.clear();
    if (draft_) draft_->reset();
  }
  DraftProposals run_draft(const DraftStep& step) override {
    TANDEM_CHECK(draft_, "run_draft: no draft model");
    return draft_->run(step, pending_.empty() ? nullptr : &pending_.back());
  }
  LoraSlotImage lora_image(const PeftAdapter& adapter) const override {
    return lora_slot_image(model_->lora_targets(), adapter);
  }
  void install_lora(int slot, const LoraSlotImage& image) override {
    install_lora_slot(*backend_, model_->lora_targets(), slot, image);
  }
  VisionEncodeStats vision_encode_stats() const override {
    if (!runner_) return {};
    return {runner_->encoder_cache().num_encoded(), runner_->encoder_cache().encode_seconds()};
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  ExecutorConfig config_;
  ExecutorInfo info_;
  std::unique_ptr<ModelRunner> runner_;          // from allocate_kv on
  std::deque<PendingSample> pending_;            // sampling ops not collected yet, oldest first
  std::optional<Tensor> logits_;                 // of the forward issued last, until it is sampled
  std::vector<GeneratedToken> prompt_logprobs_;  // of the forward issued last, until taken
  std::vector<std::vector<float>> pooled_;  // [E][hidden] of the forward issued last, until taken
  std::unique_ptr<DraftWorker> draft_;      // speculative decoding's draft model
};

KvRoom SingleWorkerExecutor::kv_room(const KvSizing& sizing) const {
  const DType dtype = config_.kv_dtype.value_or(backend_->act_dtype());
  int64_t per_block = kv_bytes_per_block(model_->kv_specs(), sizing.block_size, dtype);
  if (draft_) per_block += draft_->bytes_per_block(sizing.block_size, dtype);
  return {.bytes_available = spare_kv_bytes(*backend_, model_->config(), sizing),
          .bytes_per_token = per_block / sizing.block_size};
}

KvLayout SingleWorkerExecutor::allocate_kv(const KvSizing& sizing) {
  TANDEM_CHECK(!runner_, "allocate_kv: the KV cache is allocated already");
  const std::vector<LayerKvSpec> specs = model_->kv_specs();
  KvLayout layout;
  layout.dtype = config_.kv_dtype.value_or(backend_->act_dtype());
  layout.groups = kv_groups_of(specs);
  std::vector<int64_t> block_bytes =
      group_block_bytes(specs, layout.groups, sizing.block_size, layout.dtype);
  if (draft_) {  // the draft's K/V rides in the blocks of one group (draft_worker.h)
    layout.draft_group = DraftWorker::table_group(layout.groups);
    layout.draft_num_groups = draft_->num_groups();
    block_bytes[size_t(*layout.draft_group)] +=
        draft_->bytes_per_block(sizing.block_size, layout.dtype);
  }
  KvSizing s = sizing;
  if (!s.budget_bytes) {  // every row at full length, if the device can spare that much
    const int64_t want = kv_bytes(plan_group_blocks(layout.groups, block_bytes, s), block_bytes);
    const int64_t spare = spare_kv_bytes(*backend_, model_->config(), s);
    const int64_t two_blocks = 2 * kv_bytes_per_block(specs, s.block_size, layout.dtype);
    if (spare < want) s.budget_bytes = std::max(spare, two_blocks);
  }
  layout.num_blocks = plan_group_blocks(layout.groups, block_bytes, s);
  layout.bytes = kv_bytes(layout.num_blocks, block_bytes);
  layout.budget_bytes = s.budget_bytes.value_or(layout.bytes);
  runner_ = std::make_unique<ModelRunner>(*model_, *backend_, layout.num_blocks, s.block_size,
                                          layout.dtype);
  if (draft_)
    draft_->allocate(layout.num_blocks[size_t(*layout.draft_group)], s.block_size, layout.dtype);
  runner_->set_encoder_cache_bytes(config_.encoder_cache_bytes);
  runner_->encoder_cache().set_timing(config_.vision_timing || !info_.asynchronous,
                                      config_.vision_timing && info_.asynchronous);
  return layout;
}

void SingleWorkerExecutor::prepare(int max_model_len, int max_rows) {
  TANDEM_CHECK(runner_, "prepare: allocate_kv first");
  if (config_.graphs) runner_->enable_graphs(max_model_len, max_rows);
  if (draft_) draft_->prepare(max_model_len, max_rows, config_.graphs);
}

void SingleWorkerExecutor::issue_forward(const StepPlan& plan) {
  TANDEM_CHECK(runner_, "issue: allocate_kv first");
  TANDEM_CHECK(!logits_, "issue: the previous step's logits were never sampled");
  // Fed tokens come from the latest sampling op: the step issued just before this one.
  const PendingSample* prev = pending_.empty() ? nullptr : &pending_.back();
  prompt_logprobs_.clear();
  pooled_.clear();
  Tensor pooled;  // the embedding rows' sums (pooling_step.h), when the plan pools
  if (plan.logprob_index.empty()) {
    Tensor logits = runner_->forward(plan, prev, &pooled);
    if (!plan.sample_index.empty()) logits_ = std::move(logits);
  } else {
    // One forward computes both: the prompt rows' logits first, the sampled rows' after.
    StepPlan both = plan;
    both.sample_index = plan.logprob_index;
    both.sample_index.insert(both.sample_index.end(), plan.sample_index.begin(),
                             plan.sample_index.end());
    Tensor logits = runner_->forward(both, prev, &pooled);
    const int64_t num_prompt_rows = int64_t(plan.logprob_index.size());
    prompt_logprobs_ = score_prompt_rows(*backend_, logits.slice_rows(0, num_prompt_rows), plan);
    if (!plan.sample_index.empty())
      logits_ = logits.slice_rows(num_prompt_rows, int64_t(plan.sample_index.size()));
  }
  if (pooled.defined()) pooled_ = pooled_runs_to_host(*backend_, pooled);
}

void SingleWorkerExecutor::issue_sampling(std::span<const SampleRow> rows) {
  TANDEM_CHECK(logits_, "issue_sampling: no forward waits to be sampled");
  Tensor logits = std::move(*logits_);
  logits_.reset();
  // Proposals the draft model drew are checked against the logits it drew them from.
  const std::optional<Tensor> q = draft_ ? draft_->take_logits() : std::nullopt;
  pending_.push_back(backend_->sample_async(logits, rows, q ? &*q : nullptr));
}

std::vector<SampledToken> SingleWorkerExecutor::collect() {
  TANDEM_CHECK(!pending_.empty(), "collect: no step in flight");
  PendingSample sample = std::move(pending_.front());
  pending_.pop_front();
  std::vector<SampledToken> tokens(size_t(sample.num_rows));
  backend_->sample_wait(sample, tokens);
  return tokens;
}

}  // namespace

std::unique_ptr<Executor> make_executor(std::unique_ptr<Backend> backend,
                                        std::unique_ptr<Model> model, ExecutorConfig config,
                                        std::unique_ptr<Model> draft) {
  return std::make_unique<SingleWorkerExecutor>(std::move(backend), std::move(model), config,
                                                std::move(draft));
}

}  // namespace tandem
