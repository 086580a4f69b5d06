#include "engine/decode_graphs.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "engine/model_runner.h"

namespace tandem {

DecodeGraphs::DecodeGraphs(Model& model, Backend& backend, std::span<PagedKv> kv, int num_groups,
                           int block_size, int max_blocks, int max_rows)
    : model_(model),
      backend_(backend),
      kv_(kv),
      num_groups_(num_groups),
      block_size_(block_size),
      max_blocks_(max_blocks) {
  // Fine steps where a padded row costs most (small batches), coarser above.
  for (int b : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256})
    if (b < max_rows) buckets_.push_back(b);
  if (max_rows <= 256) buckets_.push_back(max_rows);
  graphs_.resize(buckets_.size() * (model_.lora_targets().capacity.enabled() ? 2 : 1));
}

bool DecodeGraphs::fits(const StepPlan& plan) const {
  int B = plan.num_rows();
  if (B == 0 || buckets_.empty() || B > buckets_.back()) return false;
  if (plan.num_tokens() != B || int(plan.sample_index.size()) != B) return false;
  for (auto& g : plan.groups)
    if (g.max_blocks > max_blocks_) return false;
  return true;
}

DecodeGraphs::Graph DecodeGraphs::record(int rows, bool lora) {
  // Arrays at capacity: every replay reads the same addresses, whatever its rows hold.
  const StepShape capacity{.num_tokens = rows,
                           .num_rows = rows,
                           .num_samples = rows,
                           .block_size = block_size_,
                           .max_context_len = max_blocks_ * block_size_,
                           .max_row_tokens = 1,
                           .max_blocks = std::vector<int>(size_t(num_groups_), max_blocks_),
                           // The adapters' graph reads the slots whatever they hold (zeros
                           // for rows without one): a graph cannot branch per replay.
                           .lora = lora};
  Graph g;
  g.rows = rows;
  g.step = zeroed_step_tensors(backend_, capacity);
  // All rows padding: a valid step that touches only the null block.
  StepPlan pad;
  pad.groups.resize(size_t(num_groups_));
  write_inputs(g, pad);
  RecordedStep recorded =
      record_step(model_, backend_, kv_, g.step, logits_, rows, buckets_.back());
  g.logits = recorded.logits;
  g.exec = std::move(recorded.exec);
  return g;
}

void DecodeGraphs::write_inputs(Graph& g, const StepPlan& plan) {
  int B = plan.num_rows(), R = g.rows;
  auto padded = [&](const std::vector<int32_t>& v, int32_t fill) {
    std::vector<int32_t> out(size_t(R), fill);
    std::copy(v.begin(), v.end(), out.begin());
    return out;
  };
  auto write = [&](Tensor& t, const std::vector<int32_t>& v) {
    backend_.write_i32(t, v.data(), int64_t(v.size()));
  };
  std::vector<int32_t> index(size_t(R + 1));
  for (int i = 0; i <= R; i++) index[size_t(i)] = i;
  write(g.step.tokens, padded(plan.tokens, 0));
  write(g.step.positions, padded(plan.positions, 0));
  write(g.step.seq_starts, index);
  write(g.step.context_lens, padded(plan.context_lens, 1));
  index.pop_back();
  write(g.step.sample_index, index);
  if (g.step.lora.defined()) write_lora_rows(backend_, g.step.lora, padded(plan.lora_slots, 0));
  for (int k = 0; k < num_groups_; k++) {
    const KvGroupPlan& p = plan.groups[size_t(k)];
    write(g.step.groups[size_t(k)].slot_map, padded(p.slot_map, -1));
    // Only the plan's columns: kernels read no entry past a row's context, so the rest
    // of the capacity-wide table may keep older values. Padding rows get the null block.
    const int width = std::max(p.max_blocks, 1);
    std::vector<int32_t> table(size_t(R) * size_t(width), 0);
    for (int b = 0; b < B; b++)
      std::copy_n(p.block_table.begin() + size_t(b) * size_t(p.max_blocks), p.max_blocks,
                  table.begin() + size_t(b) * size_t(width));
    backend_.write_i32_rows(g.step.groups[size_t(k)].block_table, table.data(), R, width);
  }
}

void DecodeGraphs::record_all() {
  for (size_t b = 0; b < buckets_.size(); b++)
    if (graphs_[b].rows == 0) {
      graphs_[b] = record(buckets_[b], /*lora=*/false);
      recorded_++;
    }
}

Tensor DecodeGraphs::run(const StepPlan& plan, const PendingSample* prev) {
  TANDEM_CHECK(fits(plan), "DecodeGraphs::run: not a decode step of <= {} rows", buckets_.back());
  int B = plan.num_rows();
  const size_t bucket =
      size_t(std::lower_bound(buckets_.begin(), buckets_.end(), B) - buckets_.begin());
  const bool lora = !plan.lora_slots.empty();  // some row uses an adapter
  const size_t i = bucket + (lora ? buckets_.size() : 0);
  if (graphs_[i].rows == 0) {
    graphs_[i] = record(buckets_[bucket], lora);
    recorded_++;
  }
  Graph& g = graphs_[i];
  write_inputs(g, plan);
  feed_plan_tokens(backend_, g.step.tokens, plan, prev);
  backend_.replay(g.exec);
  return g.logits.slice_rows(0, B);
}

}  // namespace tandem
