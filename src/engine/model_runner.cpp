#include "engine/model_runner.h"

#include <numeric>

#include "core/error.h"
#include "engine/kv_layout.h"

namespace tandem {

int64_t ModelRunner::bytes_per_block(const Model& model, int block_size, DType dtype) {
  std::vector<LayerKvSpec> specs = model.kv_specs();
  std::vector<int64_t> bytes = group_block_bytes(specs, kv_groups_of(specs), block_size, dtype);
  return std::accumulate(bytes.begin(), bytes.end(), int64_t(0));
}

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
      kv_dtype_(kv_dtype.value_or(backend.act_dtype())) {
  TANDEM_CHECK(int(num_blocks_.size()) == groups_.num_groups(),
               "ModelRunner: {} block counts for {} KV groups", num_blocks_.size(),
               groups_.num_groups());
  std::vector<LayerKvSpec> specs = model.kv_specs();
  for (size_t i = 0; i < specs.size(); i++) {
    const LayerKvSpec& s = specs[i];
    PagedKv kv;
    if (s.shares_with < 0) {
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

StepTensors ModelRunner::upload(const StepPlan& plan, const PendingSample* prev) {
  auto i32 = [&](const std::vector<int32_t>& v, Shape shape) {
    Tensor host = Tensor::borrow(const_cast<int32_t*>(v.data()), DType::I32, shape);
    return backend_.upload(host, DType::I32);
  };
  int64_t T = plan.num_tokens(), B = plan.num_rows();
  StepTensors s;
  s.tokens = i32(plan.tokens, {T});
  feed_plan_tokens(backend_, s.tokens, plan, prev);
  s.positions = i32(plan.positions, {T});
  s.seq_starts = i32(plan.seq_starts, {B + 1});
  s.context_lens = i32(plan.context_lens, {B});
  // A step whose rows all stop mid-prompt samples nothing; the model still computes the
  // last token's logits (one row nobody reads) rather than ops over zero rows.
  std::vector<int32_t> last{int32_t(T - 1)};
  const std::vector<int32_t>& sampled = plan.sample_index.empty() ? last : plan.sample_index;
  s.sample_index = i32(sampled, {int64_t(sampled.size())});
  s.num_tokens = int(T);
  s.num_rows = int(B);
  s.block_size = block_size_;
  for (int32_t len : plan.context_lens) s.max_context_len = std::max(s.max_context_len, len);
  for (const KvGroupPlan& g : plan.groups)
    s.groups.push_back({i32(g.slot_map, {T}), i32(g.block_table, {B, int64_t(g.max_blocks)}),
                        g.max_blocks});
  s.layer_group = groups_.layer_group;
  if (s.groups.size() == 1) {  // one block space: the step's own fields are its view
    s.slot_map = s.groups[0].slot_map;
    s.block_table = s.groups[0].block_table;
    s.max_blocks = s.groups[0].max_blocks;
  }
  return s;
}

void ModelRunner::enable_graphs(int max_model_len, int max_rows) {
  if (!backend_.supports_graphs()) return;
  int max_blocks = (max_model_len + block_size_ - 1) / block_size_;
  graphs_ = std::make_unique<DecodeGraphs>(model_, backend_, kv_, groups_.layer_group,
                                           num_groups(), block_size_, max_blocks, max_rows);
}

Tensor ModelRunner::forward(const StepPlan& plan, const PendingSample* prev) {
  TANDEM_CHECK(plan.block_size == block_size_, "plan block size {} vs {}", plan.block_size,
               block_size_);
  TANDEM_CHECK(plan.num_groups() == num_groups(), "plan has {} KV groups, the model {}",
               plan.num_groups(), num_groups());
  for (int g = 0; g < num_groups(); g++)
    for (int32_t slot : plan.groups[size_t(g)].slot_map)
      TANDEM_CHECK(slot >= 0 && slot < num_blocks(g) * block_size_,
                   "slot {} out of range in KV group {} ({} blocks)", slot, g, num_blocks(g));
  if (graphs_ && graphs_->fits(plan)) return graphs_->run(plan, prev);
  StepTensors step = upload(plan, prev);
  return model_.forward(step, kv_);
}

}  // namespace tandem
