// VerifyGraphs: steps whose rows have a few tokens each — speculative verify steps (each
// speculating row's last token and its K proposals, beside plain decode rows of one) and
// the draft model's catch-up forwards — replayed as recorded graphs on backends that have
// them (CUDA), as DecodeGraphs does for steps of one token per row. On a small model such a
// step is bound by the host's launches, not the device; eager, it cost speculation more
// than the guesses saved.
//
// Key: (rows bucket R, tokens per row Q). A graph's step is R rows of exactly Q tokens
// (row r owns tokens [r·Q, (r+1)·Q)). A plan of B ≤ R rows of 1 ≤ n_b ≤ Q tokens is padded
// to it (pad_uniform_rows): row b's tokens come first, then Q − n_b copies of its last token
// (its position, its adapter, slot −1: they write no KV, and attend exactly as that token
// does, so their values are finite and never read); rows B..R−1 are padding rows at
// position 0 that write no KV and read only the null block. The plan's sampled and fed
// tokens are renumbered into the padded layout, and the logits come back in the plan's
// order. Why not one graph per token count with the rows' lengths as device inputs: every
// kernel would have to size its grid for any split of T tokens over any number of rows,
// and tokens past the last row would belong to no row; with Q fixed per graph each replay
// is an ordinary step, and Q is the host's bound on a row's tokens (max_query_len), which
// sends the attention to the decode kernel (cuda_attention.cu). The cost: a row with fewer
// tokens than the step's longest computes Q anyway — cheap in the small steps these are.
//
// Bounded: Q ≤ 8 (the decode kernel's reach; longer chunks run eager), R · Q ≤ 64 tokens
// (a graph keeps its buffers for good), no LoRA adapters (such steps run eager).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/step_plan.h"
#include "model/model.h"

namespace tandem {

// `plan` (B ≤ rows rows of 1..per_row tokens each) as `rows` rows of exactly `per_row`
// tokens (see above). Its sample_index and feed_index point at the same tokens in the new
// layout; block tables keep the plan's width.
StepPlan pad_uniform_rows(const StepPlan& plan, int rows, int per_row);

class VerifyGraphs {
 public:
  static constexpr int kMaxTokensPerRow = 8;
  static constexpr int kMaxTokens = 64;

  // `kv` is the runner's; `max_blocks` bounds every group's table width.
  VerifyGraphs(Model& model, Backend& backend, std::span<PagedKv> kv, int num_groups,
               int block_size, int max_blocks, int max_rows);

  // True when `plan` has a row of 2..kMaxTokensPerRow tokens, no longer row, no adapter,
  // and a graph bucket holds it.
  bool fits(const StepPlan& plan) const;
  // Runs the plan through its graph (recorded on first use). Logits [S, vocab] of the
  // plan's sample_index tokens. `prev`: the previous step's sampling op, for fed tokens.
  Tensor run(const StepPlan& plan, const PendingSample* prev = nullptr);
  // Records, now rather than on first use, the graphs of `rows` rows (its bucket) of
  // 2..max_tokens_per_row tokens each, as far as the bounds allow: a server that speculates
  // records its single-stream verify steps before its first request.
  void record_now(int rows, int max_tokens_per_row);
  int64_t replays() const { return replays_; }
  int64_t recorded() const { return recorded_; }

 private:
  struct Graph {
    int rows = 0, per_row = 0;
    StepTensors step;  // the device arrays the recording reads
    Tensor logits;     // [rows · per_row, vocab]: logits_'s first rows, written by every replay
    std::shared_ptr<void> exec;
  };
  // The bucket (row bucket index, tokens per row) of `plan`, or {-1, 0}.
  std::pair<int, int> bucket_of(const StepPlan& plan) const;
  Graph& graph(int bucket, int per_row);  // recorded on first use
  Graph record(int rows, int per_row);
  void write_inputs(Graph& g, const StepPlan& padded);

  Model& model_;
  Backend& backend_;
  std::span<PagedKv> kv_;
  int num_groups_;
  int block_size_;
  int max_blocks_;
  std::vector<int> row_buckets_;
  std::vector<Graph> graphs_;  // [row bucket · (kMaxTokensPerRow + 1) + per_row]
  // [kMaxTokens, vocab] f32: every graph's logits, in its first rows · per_row rows
  // (record_step). A buffer per graph would hold ~0.5 GB at a 128k vocabulary with every
  // bucket recorded (~950 tokens' logits).
  Tensor logits_;
  int64_t replays_ = 0;
  int64_t recorded_ = 0;
};

}  // namespace tandem
