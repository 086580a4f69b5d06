// Executor: the engine's one way to the device (docs/DESIGN.md §4). It owns the worker(s) —
// backend, model, model runner, decode graphs — takes each step as plain data (the
// StepPlan and the step's sampling rows) and hands back sampled tokens. The engine never
// sees a backend, a tensor or a model object.
//
// Today there is one worker (make_executor). The interface is drawn for what comes next,
// with the engine unchanged: N tensor-parallel ranks (each a worker with its shard of the
// weights and its heads of the KV cache; issue() broadcasts the plan, rank 0 samples and
// feeds every rank the tokens), or a draft model beside the target for speculative
// decoding (a second worker with its own KV layout).
//
// Overlap: issue() returns before the step has run, so the engine can plan step n+1 while
// the device runs step n. A plan's fed tokens (StepPlan::feed_index) are read, on the
// device, from the sampling op of the latest issued step that sampled; collect() returns
// the sampled tokens of issued steps in issue order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/sampling.h"
#include "core/dtype.h"
#include "engine/draft_step.h"
#include "engine/request.h"
#include "engine/step_plan.h"
#include "kv/kv_budget.h"
#include "kv/kv_groups.h"
#include "model/lora/lora_slots.h"
#include "model/model.h"

namespace tandem {

class Backend;
struct ModelConfig;  // model/config.h

struct ExecutorConfig {
  // Element type of the KV cache (kv_cache_dtype_from_name); nullopt: the activation dtype.
  std::optional<DType> kv_dtype;
  bool graphs = true;  // decode steps as recorded graphs, where the device has them
  // Speculative verify steps (rows of K + 1 tokens) as recorded graphs too
  // (engine/verify_graphs.h; TANDEM_VERIFY_GRAPHS=0 turns them off), in a speculating
  // engine only (prepare_speculation).
  bool verify_graphs = true;
  // Bytes of encoded images kept for reuse (engine/encoder_cache.h).
  int64_t encoder_cache_bytes = int64_t(256) << 20;
  // Time the vision encoder on an asynchronous device too, waiting for the device around
  // each encoding step (TANDEM_VISION_TIMING; engine/encoder_cache.h). A CPU is timed always.
  bool vision_timing = false;
};

// The vision encoder's work since start-up (Executor::vision_encode_stats).
struct VisionEncodeStats {
  int64_t images = 0;             // images (and crops) encoded; cache hits are not
  std::optional<double> seconds;  // their encoding's wall time, when timed (see above)
};

// The KV cache an executor allocated: what the engine's block manager mirrors.
struct KvLayout {
  KvGroups groups;
  std::vector<int> num_blocks;  // [G] blocks of each group, null blocks included
  DType dtype = DType::F32;     // of every cache tensor
  int64_t budget_bytes = 0;     // the budget it was sized under
  int64_t bytes = 0;            // what the blocks take, all groups together
  // A draft model's K/V (speculative decoding, draft_step.h) lives in the blocks of this
  // group (its block ids and tables), beside the target's; it has draft_num_groups groups
  // of its own, all reading that table.
  std::optional<int> draft_group;
  int draft_num_groups = 0;
};

// What the engine may know of the model an executor runs.
// The configs are shared (never null for `model`) so that this header, which most of the
// engine and the server include, needs only a declaration of ModelConfig.
struct ExecutorInfo {
  std::shared_ptr<const ModelConfig> model;
  int64_t num_parameters = 0;
  DType act_dtype = DType::F32;
  std::string device;         // "cpu", "cuda"
  bool asynchronous = false;  // steps run while the host goes on (the overlap pays)
  // The draft model of speculative decoding, when the executor runs one (run_draft).
  std::shared_ptr<const ModelConfig> draft;  // null: none
  int64_t draft_num_parameters = 0;
  VisionSpec vision;  // image input (Model::vision_spec)
};

// Room for the KV cache on the device, before it is allocated: what `--batch auto` sizes
// the step by (engine/batch_defaults.h).
struct KvRoom {
  int64_t bytes_available = 0;  // what allocate_kv would spare for `sizing` without a budget
  int64_t bytes_per_token = 0;  // one token of every layer, in the cache dtype
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const ExecutorInfo& info() const = 0;

  // The KV room allocate_kv(sizing) would have; asks the device, allocates nothing.
  virtual KvRoom kv_room(const KvSizing& sizing) const = 0;

  // Sizes the KV cache for `sizing` and allocates it. Without a byte budget: every row at
  // max_model_len, or what the device can spare after the weights and a step's
  // activations and logits when that is less. Once, before the first step.
  virtual KvLayout allocate_kv(const KvSizing& sizing) = 0;
  // Steps will have at most `max_rows` rows of at most `max_model_len` tokens (the decode
  // graphs' capacity). Once, after allocate_kv; an executor with graphs records its decode
  // graphs here.
  virtual void prepare(int max_model_len, int max_rows) = 0;

  // Issues one step in two halves, neither waiting for the device: the forward over `plan`,
  // then, when the plan samples, one sampling op over its logits (rows[s] picks the token
  // of plan.sample_index[s]). Between the two the host may still collect the previous
  // step and build the rows from its tokens (grammar masks, penalties) while the forward
  // runs. issue_forward must be followed by its issue_sampling (if the plan samples)
  // before the next issue_forward.
  virtual void issue_forward(const StepPlan& plan) = 0;
  virtual void issue_sampling(std::span<const SampleRow> rows) = 0;
  void issue(const StepPlan& plan, std::span<const SampleRow> rows) {
    issue_forward(plan);
    if (!rows.empty()) issue_sampling(rows);
  }
  // The prompt logprobs of the forward issued last (StepPlan::logprob_index): one per
  // entry, in plan order, token = its target; empty when it asked for none. Taking them
  // forgets them. On an asynchronous device that forward's rows were read when it was
  // issued (only the steps that ask for prompt logprobs wait for the device).
  virtual std::vector<GeneratedToken> take_prompt_logprobs() = 0;
  // The pooled runs of the forward issued last (StepPlan::pool_index): one sum of final
  // hidden states ([hidden] f32) per run, in plan order; empty when it pooled nothing.
  // Taking them forgets them. Like prompt logprobs, only the steps that pool wait for the
  // device. The default serves executors that never pool (the engine then fails the step).
  virtual std::vector<std::vector<float>> take_pooled() { return {}; }
  // The tokens of the oldest issued step whose tokens are not collected yet (one per
  // sampling row), waiting for them. Requires such a step.
  virtual std::vector<SampledToken> collect() = 0;
  // Forgets every step in flight (after a failed step): nothing is collected or fed from it.
  virtual void reset() = 0;

  // Speculative decoding with a draft model (engine/draft_step.h): runs the draft's
  // forwards of `step` and returns its proposals, waiting for them. The sampling op issued
  // next reads the draft logits they were drawn from (SampleRow::draft). Between steps,
  // before the step's issue_forward. The default runs no draft model and fails.
  virtual DraftProposals run_draft(const DraftStep& step);

  // Speculative decoding will verify rows of up to `tokens_per_row` tokens: an executor
  // with graphs records the single-row verify steps' now (and its draft's catch-up
  // forwards'), before the first request. Once, after prepare.
  virtual void prepare_speculation(int tokens_per_row) { (void)tokens_per_row; }
  // Graphs recorded so far, decode and verify (engine/decode_graphs.h, verify_graphs.h), the
  // draft's included: a step that records one costs far more than its replays, so the
  // speculator does not charge it. The base model's decode graphs are recorded in prepare,
  // one per batch bucket; verify graphs of several rows and the adapters' decode graphs on
  // first use, mid-run, inside a cost bucket measured long before (step_cost_model.h).
  virtual int64_t graphs_recorded() const { return 0; }

  // Between steps, on the engine's thread. The default: an executor that encodes nothing.
  virtual VisionEncodeStats vision_encode_stats() const { return {}; }

  // The host image of `adapter` for one LoRA slot (model/lora/lora_slots.h). Any thread,
  // also while steps run: it reads only the shapes the model was loaded with. Throws
  // tandem::Error naming the folder and the module when the adapter does not fit the model.
  virtual LoraSlotImage lora_image(const PeftAdapter& adapter) const = 0;
  // Copies `image` into LoRA slot `slot` (1..info().model.lora.max_loras), in stream order
  // after the steps already issued. Between steps only, and only into a slot no issued
  // step's row reads (a free one: LoraAdapters).
  virtual void install_lora(int slot, const LoraSlotImage& image) = 0;
};

// One worker on `backend`, running `model`, and `draft` beside it (loaded on the same
// backend) when speculative decoding has a draft model.
std::unique_ptr<Executor> make_executor(std::unique_ptr<Backend> backend,
                                        std::unique_ptr<Model> model, ExecutorConfig config = {},
                                        std::unique_ptr<Model> draft = nullptr);

}  // namespace tandem
