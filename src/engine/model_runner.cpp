#include "engine/model_runner.h"

#include <algorithm>

#include "core/error.h"
#include "engine/kv_layout.h"
#include "engine/pooling_step.h"
#include "model/config.h"

namespace tandem {

ModelRunner::ModelRunner(Model& model, Backend& backend, int num_blocks, int block_size,
                         std::optional<DType> kv_dtype)
    : ModelRunner(model, backend,
                  std::vector<int>(size_t(kv_groups_of(model.kv_specs()).num_groups()), num_blocks),
                  block_size, kv_dtype) {}

ModelRunner::ModelRunner(Model& model, Backend& backend, std::span<const int> num_blocks,
                         int block_size, std::optional<DType> kv_dtype)
    : model_(model),
      backend_(backend),
      groups_(kv_groups_of(model.kv_specs())),
      num_blocks_(num_blocks.begin(), num_blocks.end()),
      block_size_(block_size),
      kv_dtype_(kv_dtype.value_or(backend.act_dtype())),
      encoder_cache_(backend, int64_t(256) << 20) {
  TANDEM_CHECK(int(num_blocks_.size()) == groups_.num_groups(),
               "ModelRunner: {} block counts for {} KV groups", num_blocks_.size(),
               groups_.num_groups());
  std::vector<LayerKvSpec> specs = model.kv_specs();
  for (size_t i = 0; i < specs.size(); i++) {
    const LayerKvSpec& s = specs[i];
    PagedKv kv;
    kv.group = groups_.layer_group[i];  // a sharing layer: its source's
    if (!s.shares_with) {
      Shape shape{num_blocks_[size_t(groups_.layer_group[i])], block_size, s.num_kv_heads,
                  s.head_dim};
      kv.k = backend.zeros(kv_dtype_, shape);
      kv.v = backend.zeros(kv_dtype_, shape);
      // A backend that stores another dtype would hold more bytes than the budget planned.
      TANDEM_CHECK(kv.k.dtype == kv_dtype_ && kv.v.dtype == kv_dtype_,
                   "the {} backend cannot hold a {} KV cache (it stores {})", backend.name(),
                   dtype_name(kv_dtype_), dtype_name(kv.k.dtype));
    }
    kv_.push_back(kv);
  }
}

void feed_plan_tokens(Backend& backend, Tensor& tokens, const StepPlan& plan,
                      const PendingSample* prev) {
  if (plan.feed_index.empty()) return;
  TANDEM_CHECK(prev != nullptr, "the plan feeds {} tokens from a previous step that is not given",
               plan.feed_index.size());
  backend.feed_tokens(tokens, plan.feed_index, plan.feed_source, *prev);
}

RecordedStep record_step(Model& model, Backend& backend, std::span<PagedKv> kv, StepTensors& step,
                         Tensor& shared, int64_t rows, int64_t capacity_rows) {
  if (shared.defined()) step.logits_out = shared.slice_rows(0, rows);
  const int64_t vocab = model.forward(step, kv).cols();
  if (!shared.defined()) shared = backend.alloc(DType::F32, {capacity_rows, vocab});
  step.logits_out = shared.slice_rows(0, rows);
  backend.synchronize();
  backend.capture_begin();
  RecordedStep recorded;
  recorded.logits = model.forward(step, kv);
  recorded.exec = backend.capture_end();
  return recorded;
}

// StepTensors::max_row_tokens of `plan`: its longest row when every row of several tokens
// is a verify chunk (all its tokens sampled, no prompt logprobs in the step), else 0. A
// prompt chunk keeps the step on the prefill kernel whatever its length, so a row's
// attention does not depend on the rows beside it.
namespace {

int verify_row_tokens(const StepPlan& plan) {
  if (!plan.logprob_index.empty()) return 0;
  int longest = 0;
  for (size_t b = 0; b + 1 < plan.seq_starts.size(); b++) {
    const int32_t begin = plan.seq_starts[b], end = plan.seq_starts[b + 1];
    if (end - begin > 1) {
      const auto lo = std::lower_bound(plan.sample_index.begin(), plan.sample_index.end(), begin);
      const auto hi = std::lower_bound(lo, plan.sample_index.end(), end);
      if (hi - lo != end - begin) return 0;  // a prompt chunk
    }
    longest = std::max(longest, end - begin);
  }
  return longest;
}

}  // namespace

StepTensors ModelRunner::upload(const StepPlan& plan, const PendingSample* prev) {
  // A step whose rows all stop mid-prompt samples nothing; the model still computes the
  // last token's logits (one row nobody reads) rather than ops over zero rows.
  const std::vector<int32_t> last{int32_t(plan.num_tokens() - 1)};
  const std::vector<int32_t>& sampled = plan.sample_index.empty() ? last : plan.sample_index;
  StepShape shape{.num_tokens = plan.num_tokens(),
                  .num_rows = plan.num_rows(),
                  .num_samples = int(sampled.size()),
                  .block_size = block_size_,
                  .lora = !plan.lora_slots.empty()};
  for (int32_t len : plan.context_lens)
    shape.max_context_len = std::max(shape.max_context_len, len);
  shape.max_row_tokens = verify_row_tokens(plan);
  for (const KvGroupPlan& g : plan.groups) shape.max_blocks.push_back(g.max_blocks);
  StepTensors s = alloc_step_tensors(backend_, shape);
  auto write = [&](Tensor& t, const std::vector<int32_t>& v) {
    backend_.write_i32(t, v.data(), int64_t(v.size()));
  };
  write(s.tokens, plan.tokens);
  feed_plan_tokens(backend_, s.tokens, plan, prev);
  write(s.positions, plan.positions);
  write(s.seq_starts, plan.seq_starts);
  write(s.context_lens, plan.context_lens);
  write(s.sample_index, sampled);
  if (!plan.lora_slots.empty()) write_lora_rows(backend_, s.lora, plan.lora_slots);
  for (size_t g = 0; g < plan.groups.size(); g++) {
    write(s.groups[g].slot_map, plan.groups[g].slot_map);
    write(s.groups[g].block_table, plan.groups[g].block_table);
  }
  upload_media(s, plan);
  return s;
}

void ModelRunner::upload_media(StepTensors& step, const StepPlan& plan) {
  if (plan.media.empty()) return;
  TANDEM_CHECK(int(plan.media_ends.size()) == plan.num_tokens(),
               "plan has {} image ends for {} tokens", plan.media_ends.size(), plan.num_tokens());
  step.media_ends = backend_.alloc(DType::I32, {plan.num_tokens()});
  backend_.write_i32(step.media_ends, plan.media_ends.data(), int64_t(plan.media_ends.size()));
  std::vector<const ImageInput*> images;
  for (const StepPlan::MediaPiece& m : plan.media) images.push_back(m.image.get());
  const std::vector<Tensor> soft = encoder_cache_.get(
      images, [&](std::span<const ImageInput* const> todo) { return model_.encode_images(todo); });
  for (size_t i = 0; i < plan.media.size(); i++)
    step.media.push_back({plan.media[i].first_token, soft[i]});
}

void ModelRunner::enable_graphs(int max_model_len, int max_rows, bool verify) {
  if (!backend_.supports_graphs()) return;
  graph_max_blocks_ = (max_model_len + block_size_ - 1) / block_size_;
  graph_max_rows_ = max_rows;
  graphs_ = std::make_unique<DecodeGraphs>(model_, backend_, kv_, num_groups(), block_size_,
                                           graph_max_blocks_, max_rows);
  graphs_->record_all();
  if (verify) make_verify_graphs();
}

void ModelRunner::make_verify_graphs() {
  if (!verify_graphs_)  // the decode graphs' bounds
    verify_graphs_ = std::make_unique<VerifyGraphs>(
        model_, backend_, kv_, num_groups(), block_size_, graph_max_blocks_, graph_max_rows_);
}

void ModelRunner::record_verify_graphs(int rows, int max_tokens_per_row) {
  if (!graphs_) return;
  make_verify_graphs();
  verify_graphs_->record_now(rows, max_tokens_per_row);
}

Tensor ModelRunner::forward(const StepPlan& plan, const PendingSample* prev, Tensor* pooled) {
  TANDEM_CHECK(plan.block_size == block_size_, "plan block size {} vs {}", plan.block_size,
               block_size_);
  TANDEM_CHECK(plan.num_groups() == num_groups(), "plan has {} KV groups, the model {}",
               plan.num_groups(), num_groups());
  TANDEM_CHECK(plan.lora_slots.empty() || int(plan.lora_slots.size()) == plan.num_tokens(),
               "plan has {} LoRA slots for {} tokens", plan.lora_slots.size(), plan.num_tokens());
  for (int32_t slot : plan.lora_slots)
    TANDEM_CHECK(slot >= 0 && slot < model_.lora_targets().capacity.num_slots(),
                 "LoRA slot {} but the model has {}", slot,
                 model_.lora_targets().capacity.num_slots());
  for (int g = 0; g < num_groups(); g++)
    for (int32_t slot : plan.groups[size_t(g)].slot_map)
      TANDEM_CHECK(slot >= -1 && slot < num_blocks(g) * block_size_,  // -1: writes nowhere
                   "slot {} out of range in KV group {} ({} blocks)", slot, g, num_blocks(g));
  // A recorded decode step samples each row's last token; prompt-logprob rows are others,
  // and it pools nothing; a step writing soft tokens (a one-token image can look like a
  // decode step) is not one either.
  if (graphs_ && plan.logprob_index.empty() && plan.pool_index.empty() && plan.media.empty()) {
    if (graphs_->fits(plan)) return graphs_->run(plan, prev);
    if (verify_graphs_ && plan.media_ends.empty() && verify_graphs_->fits(plan))
      return verify_graphs_->run(plan, prev);
  }
  StepTensors step = upload(plan, prev);
  step.pool = upload_pool_tensors(backend_, plan, model_.config().hidden_size);
  Tensor logits = model_.forward(step, kv_);
  if (pooled && step.pool.defined()) *pooled = step.pool.sums;
  return logits;
}

}  // namespace tandem
