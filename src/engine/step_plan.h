// StepPlan: the scheduler → runner contract (docs/DESIGN.md §2), a plain struct of host
// arrays. There is no prefill or decode mode: a row is some tokens of one sequence
// whose K/V are not yet in the cache, a whole prompt, a chunk of one, or one new token.
// Where K/V live is per KV group (kv/kv_groups.h): each group has its own block ids, so
// its own slot map and block table.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "media/image_input.h"

namespace tandem {

// The step's K/V addresses in one KV group's block space.
struct KvGroupPlan {
  std::vector<int32_t> slot_map;     // [T] block * block_size + offset of each token's K/V
  std::vector<int32_t> block_table;  // [B, max_blocks] (padded with the null block)
  int max_blocks = 0;
};

struct StepPlan {
  std::vector<int32_t> tokens;        // [T] new tokens of all rows, concatenated
  std::vector<int32_t> positions;     // [T] position of each token in its sequence
  std::vector<int32_t> seq_starts;    // [B+1] row b owns tokens [seq_starts[b], seq_starts[b+1])
  std::vector<int32_t> context_lens;  // [B] tokens of row b in the cache after this step
  std::vector<int32_t> sample_index;  // [S] tokens whose logits the step returns
  std::vector<KvGroupPlan> groups;    // [G] one per KV group
  int block_size = 16;
  // Tokens the host does not know yet: the previous step sampled them and they are still
  // on the device. tokens[feed_index[f]] (0 here) is row feed_source[f] of that step's
  // sampling op (Backend::feed_tokens writes it before the forward).
  std::vector<int32_t> feed_index;   // [F]
  std::vector<int32_t> feed_source;  // [F]
  // [T] the LoRA slot each token's projections add (backend/linear.h; 0: the base model),
  // or empty when no row has an adapter.
  std::vector<int32_t> lora_slots;
  // Prompt logprobs (GenerationRequest::prompt_logprobs): the logits of token
  // logprob_index[p] score logprob_target[p], with the logprob_top[p] best alternatives.
  // They are the rows' own prompt tokens, so never fed ones.
  std::vector<int32_t> logprob_index;   // [P]
  std::vector<int32_t> logprob_target;  // [P]
  std::vector<int32_t> logprob_top;     // [P]
  // Embedding rows (engine/pooling.h): the final hidden states of tokens pool_index[q] are
  // summed run by run, run e over pool_index[pool_starts[e] .. pool_starts[e+1]): one run
  // per row that pools this step, in row order. Both empty when no row pools.
  std::vector<int32_t> pool_index;   // [Q]
  std::vector<int32_t> pool_starts;  // [E+1]
  // Images (StepTensors::media_ends, ::media): [T] the end of the image holding each
  // token, 0 elsewhere; empty when no token of the step is an image token. Each image lies
  // whole inside its row's tokens of the step.
  std::vector<int32_t> media_ends;
  // The images whose soft tokens this step writes, at tokens [first_token, + length).
  struct MediaPiece {
    int first_token = 0;
    std::shared_ptr<const ImageInput> image;
  };
  std::vector<MediaPiece> media;

  int num_rows() const { return int(context_lens.size()); }
  int num_tokens() const { return int(tokens.size()); }
  int num_groups() const { return int(groups.size()); }
};

// One row of a step, as the scheduler decided it.
struct PlanRow {
  std::span<const int32_t> tokens;  // the sequence's received tokens (prompt + generated)
  int start = 0;                    // first position to compute (= its num_computed)
  int count = 0;                    // positions to compute this step
  // [G] the sequence's block ids per KV group; entries of blocks a window group released
  // are the null block (never a new token's slot).
  std::span<const std::vector<int32_t>> block_tables;
  int num_logits = 0;  // logits of the last `num_logits` tokens (0: none)
  // When position tokens.size() is a token still in flight: its row in the previous
  // step's sampling op, which feeds it on the device (StepPlan::feed_index).
  std::optional<int> feed_from;
  int lora_slot = 0;  // the sequence's adapter slot (0: none)
  // Positions [logprob_begin, logprob_end) (clipped to this row's) score the prompt token
  // after each, with `logprob_top` alternatives (StepPlan::logprob_index).
  int logprob_begin = 0, logprob_end = 0, logprob_top = 0;
  // Positions [pool_begin, pool_end) (clipped to this row's) are pooled, as one run
  // (StepPlan::pool_index).
  int pool_begin = 0, pool_end = 0;
  // Speculative decoding: proposals after `tokens` (positions tokens.size() on); the row
  // then has no token in flight.
  std::span<const int32_t> draft;
  // The sequence's images (sorted by start); those overlapping [start, start + count) must
  // lie inside it (the scheduler never splits one: Sequence::fit_chunk).
  std::span<const MediaSpan> media;
};

// Every row must have the same number of groups (>= 1).
StepPlan build_step_plan(std::span<const PlanRow> rows, int block_size);

}  // namespace tandem
