// Embedding requests (docs/embeddings.md; docs/DESIGN.md §10): a prompt-only request whose
// pooled final hidden state, not logits, leaves the device. The hidden state of a position
// is the model's last residual stream through its final norm — what the LM head would
// multiply (Hugging Face's last_hidden_state), before any logit divisor or softcap.
//
// Pooling reads a range of prompt positions: `last` the last one, `cls` the first, `mean`
// all of them. The device sums the range's hidden states in f32 run by run (a chunked
// prompt is one run per step), only the sum of each run leaves the device ([hidden] f32),
// and the host adds the runs up and divides. Positions are pooled in order and each once:
// a preempted request that recomputes part of its prompt does not pool it again.
//
// Prefix cache: a position read from the cache was not computed, so it has no hidden
// state. A request's prefix hit stops at or before the first position it still has to
// pool (Sequence::first_wanted_logits): `last` reuses every cached block but the last
// token's, while `mean` and `cls` compute their prompt from position 0 (they still leave
// their blocks in the cache for others).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tandem {

enum class Pooling : uint8_t { Last, Mean, Cls };

const char* pooling_name(Pooling p);
// "last", "mean", "cls"; nullopt for anything else.
std::optional<Pooling> pooling_from_name(std::string_view name);

// Prompt positions [begin, end).
struct PositionRange {
  int begin = 0, end = 0;
  bool empty() const { return begin >= end; }
  int size() const { return empty() ? 0 : end - begin; }
};

// The positions `p` reads in a prompt of `num_prompt` tokens (>= 1).
PositionRange pooled_positions(Pooling p, int num_prompt);

// One request's pooling so far: the f32 sum of the hidden states of the first `num_pooled`
// positions of its range.
class PoolingState {
 public:
  PoolingState(Pooling kind, int num_prompt);

  Pooling kind() const { return kind_; }
  // The positions still to pool (empty once done).
  PositionRange owed() const { return {range_.begin + num_pooled_, range_.end}; }
  bool done() const { return owed().empty(); }
  // A run of `count` positions that continues the owed ones, summed: [hidden] f32.
  void add(std::span<const float> run_sum, int count);
  // The pooled vector: the mean of the range's hidden states (for `last` and `cls` the one
  // hidden state). Requires done().
  std::vector<float> vector() const;

 private:
  Pooling kind_;
  PositionRange range_;
  int num_pooled_ = 0;
  std::vector<double> sum_;  // [hidden], empty until the first run
};

}  // namespace tandem
