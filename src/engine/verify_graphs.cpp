#include "engine/verify_graphs.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "engine/model_runner.h"

namespace tandem {

namespace {

// The padded layout's token of plan token t: row b's i-th token moves to b·Q + i.
std::vector<int32_t> token_map(const StepPlan& plan, int per_row) {
  std::vector<int32_t> to(size_t(plan.num_tokens()));
  for (int b = 0; b < plan.num_rows(); b++)
    for (int t = plan.seq_starts[size_t(b)]; t < plan.seq_starts[size_t(b) + 1]; t++)
      to[size_t(t)] = b * per_row + (t - plan.seq_starts[size_t(b)]);
  return to;
}

}  // namespace

StepPlan pad_uniform_rows(const StepPlan& plan, int rows, int per_row) {
  const int B = plan.num_rows(), T = rows * per_row;
  TANDEM_CHECK(B <= rows, "pad_uniform_rows: {} rows into {}", B, rows);
  StepPlan out;
  out.block_size = plan.block_size;
  out.tokens.assign(size_t(T), 0);
  out.positions.assign(size_t(T), 0);
  out.context_lens.assign(size_t(rows), 1);  // padding rows: one key, in the null block
  if (!plan.lora_slots.empty()) out.lora_slots.assign(size_t(T), 0);
  for (int r = 0; r <= rows; r++) out.seq_starts.push_back(r * per_row);
  out.groups.resize(plan.groups.size());
  for (size_t k = 0; k < plan.groups.size(); k++) {
    out.groups[k].max_blocks = plan.groups[k].max_blocks;
    out.groups[k].slot_map.assign(size_t(T), -1);
    out.groups[k].block_table = plan.groups[k].block_table;  // [B, width], then null rows
    out.groups[k].block_table.resize(size_t(rows) * size_t(plan.groups[k].max_blocks), 0);
  }
  for (int b = 0; b < B; b++) {
    const int s0 = plan.seq_starts[size_t(b)], n = plan.seq_starts[size_t(b) + 1] - s0;
    TANDEM_CHECK(n >= 1 && n <= per_row, "pad_uniform_rows: row {} has {} tokens, not 1..{}", b, n,
                 per_row);
    out.context_lens[size_t(b)] = plan.context_lens[size_t(b)];
    for (int i = 0; i < per_row; i++) {
      const size_t src = size_t(s0 + std::min(i, n - 1)), dst = size_t(b * per_row + i);
      out.tokens[dst] = plan.tokens[src];
      out.positions[dst] = plan.positions[src];
      if (!plan.lora_slots.empty()) out.lora_slots[dst] = plan.lora_slots[src];
      if (i < n)  // the copies write nowhere
        for (size_t k = 0; k < plan.groups.size(); k++)
          out.groups[k].slot_map[dst] = plan.groups[k].slot_map[src];
    }
  }
  const std::vector<int32_t> to = token_map(plan, per_row);
  for (int32_t t : plan.sample_index) out.sample_index.push_back(to[size_t(t)]);
  for (int32_t t : plan.feed_index) out.feed_index.push_back(to[size_t(t)]);
  out.feed_source = plan.feed_source;
  return out;
}

VerifyGraphs::VerifyGraphs(Model& model, Backend& backend, std::span<PagedKv> kv, int num_groups,
                           int block_size, int max_blocks, int max_rows)
    : model_(model),
      backend_(backend),
      kv_(kv),
      num_groups_(num_groups),
      block_size_(block_size),
      max_blocks_(max_blocks) {
  // The decode graphs' buckets, as far as two tokens a row stay within kMaxTokens.
  for (int b : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64})
    if (b < max_rows && 2 * b <= kMaxTokens) row_buckets_.push_back(b);
  if (2 * max_rows <= kMaxTokens) row_buckets_.push_back(max_rows);
  graphs_.resize(row_buckets_.size() * size_t(kMaxTokensPerRow + 1));
}

std::pair<int, int> VerifyGraphs::bucket_of(const StepPlan& plan) const {
  const int B = plan.num_rows();
  if (B == 0 || row_buckets_.empty() || !plan.lora_slots.empty() || plan.sample_index.empty())
    return {-1, 0};
  int q = 0;
  for (int b = 0; b < B; b++) {
    const int n = plan.seq_starts[size_t(b) + 1] - plan.seq_starts[size_t(b)];
    if (n < 1) return {-1, 0};
    q = std::max(q, n);
  }
  if (q < 2 || q > kMaxTokensPerRow) return {-1, 0};
  for (const KvGroupPlan& g : plan.groups)
    if (g.max_blocks > max_blocks_) return {-1, 0};
  const auto it = std::lower_bound(row_buckets_.begin(), row_buckets_.end(), B);
  if (it == row_buckets_.end() || *it * q > kMaxTokens) return {-1, 0};
  return {int(it - row_buckets_.begin()), q};
}

bool VerifyGraphs::fits(const StepPlan& plan) const {
  return bucket_of(plan).first >= 0;
}

VerifyGraphs::Graph VerifyGraphs::record(int rows, int per_row) {
  const int T = rows * per_row;
  // Arrays at capacity: every replay reads the same addresses, whatever its rows hold.
  const StepShape capacity{.num_tokens = T,
                           .num_rows = rows,
                           .num_samples = T,
                           .block_size = block_size_,
                           .max_context_len = max_blocks_ * block_size_,
                           .max_row_tokens = per_row,
                           .max_blocks = std::vector<int>(size_t(num_groups_), max_blocks_)};
  Graph g;
  g.rows = rows;
  g.per_row = per_row;
  g.step = zeroed_step_tensors(backend_, capacity);
  // All rows padding: a valid step that touches only the null block.
  StepPlan empty;
  empty.block_size = block_size_;
  empty.seq_starts.push_back(0);
  empty.groups.resize(size_t(num_groups_));
  write_inputs(g, pad_uniform_rows(empty, rows, per_row));
  RecordedStep recorded = record_step(model_, backend_, kv_, g.step, logits_, T, kMaxTokens);
  g.logits = recorded.logits;
  g.exec = std::move(recorded.exec);
  return g;
}

void VerifyGraphs::write_inputs(Graph& g, const StepPlan& padded) {
  const int T = g.rows * g.per_row;
  auto write = [&](Tensor& t, const std::vector<int32_t>& v) {
    backend_.write_i32(t, v.data(), int64_t(v.size()));
  };
  write(g.step.tokens, padded.tokens);
  write(g.step.positions, padded.positions);
  write(g.step.seq_starts, padded.seq_starts);
  write(g.step.context_lens, padded.context_lens);
  std::vector<int32_t> sampled = padded.sample_index;
  sampled.resize(size_t(T), 0);  // past the plan's: token 0's logits, unread
  write(g.step.sample_index, sampled);
  for (int k = 0; k < num_groups_; k++) {
    const KvGroupPlan& p = padded.groups[size_t(k)];
    write(g.step.groups[size_t(k)].slot_map, p.slot_map);
    // Only the plan's columns, as DecodeGraphs does: kernels read no entry past a row's
    // context. Padding rows get the null block.
    const int width = std::max(p.max_blocks, 1);
    std::vector<int32_t> table(size_t(g.rows) * size_t(width), 0);
    for (int b = 0; b < g.rows && p.max_blocks > 0; b++)
      std::copy_n(p.block_table.begin() + size_t(b) * size_t(p.max_blocks), p.max_blocks,
                  table.begin() + size_t(b) * size_t(width));
    backend_.write_i32_rows(g.step.groups[size_t(k)].block_table, table.data(), g.rows, width);
  }
}

VerifyGraphs::Graph& VerifyGraphs::graph(int bucket, int per_row) {
  Graph& g = graphs_[size_t(bucket) * size_t(kMaxTokensPerRow + 1) + size_t(per_row)];
  if (g.rows == 0) {
    g = record(row_buckets_[size_t(bucket)], per_row);
    recorded_++;
  }
  return g;
}

void VerifyGraphs::record_now(int rows, int max_tokens_per_row) {
  const auto it = std::lower_bound(row_buckets_.begin(), row_buckets_.end(), rows);
  if (rows < 1 || it == row_buckets_.end()) return;
  for (int q = 2; q <= std::min(max_tokens_per_row, kMaxTokensPerRow) && *it * q <= kMaxTokens; q++)
    graph(int(it - row_buckets_.begin()), q);
}

Tensor VerifyGraphs::run(const StepPlan& plan, const PendingSample* prev) {
  const auto [bucket, q] = bucket_of(plan);
  TANDEM_CHECK(bucket >= 0, "VerifyGraphs::run: the step has no graph bucket");
  Graph& g = graph(bucket, q);
  const StepPlan padded = pad_uniform_rows(plan, g.rows, g.per_row);
  write_inputs(g, padded);
  feed_plan_tokens(backend_, g.step.tokens, padded, prev);
  backend_.replay(g.exec);
  replays_++;
  return g.logits.slice_rows(0, int64_t(plan.sample_index.size()));
}

}  // namespace tandem
