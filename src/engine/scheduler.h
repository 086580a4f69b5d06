// Scheduler: decides, each step, which sequences advance and by how many tokens.
// Two separate decisions (docs/DESIGN.md §2): admission — may a waiting sequence hold KV
// blocks? — and packing — what fits in this step under the token budget and the row cap?
// Running sequences go first, oldest first; when one cannot get a block, the newest
// running sequence is preempted (its blocks freed, recomputed later). Waiting sequences
// are admitted in arrival order and never overtaken (FIFO). Block accounting is per KV
// group (kv/kv_block_manager.h): before each step, sliding-window groups release the
// blocks that left every running sequence's window; a sequence fits when every group can
// hold what it computes next (and the full-attention group its whole prompt). How much of
// a sequence may be computed is the sequence's to say (Sequence::num_schedulable: it
// accounts for tokens still in flight; Sequence::fit_chunk: an image's tokens go in one
// step, which may then exceed the token budget); the scheduler knows nothing of the overlap.
// A running row may bring proposals (Sequence::spec.num_draft, engine/speculator.h): they
// ride in its chunk when the token budget and the blocks allow, and are cut first when not
// (never a reason to preempt).
#pragma once

#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/kv_block_manager.h"

namespace tandem {

struct SchedulerConfig {
  int max_rows = 1;               // --batch: sequences per step
  int max_batched_tokens = 2048;  // tokens per step, all rows together
  int prompt_concurrency = 8;     // rows still prefilling, per step
  int block_size = 16;
};

// Prefix-cache lookups of first admissions (a preempted sequence's resumption is not a
// query), in prompt tokens: vLLM's prefix_cache_queries / prefix_cache_hits.
struct PrefixCacheCounts {
  int64_t queries = 0;  // prompt tokens looked up
  int64_t hits = 0;     // of them, found cached
};

struct ScheduledRow {
  Sequence* seq = nullptr;
  int num_tokens = 0;   // computed this step, from seq->num_computed
  bool sample = false;  // the step reaches the sequence's last token
  // Speculative decoding: the last num_draft of num_tokens are the row's proposals
  // (Sequence::spec), each position from its last token on sampled.
  int num_draft = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvBlockManager& kv);

  void add(Sequence* seq);                              // queues a new sequence
  std::vector<ScheduledRow> schedule();                 // plans one step
  void advance(const std::vector<ScheduledRow>& rows);  // after the forward: num_computed
  // Removes it and frees its blocks; `cache` names its computed blocks first (off when
  // the step that computed them failed).
  void finish(Sequence* seq, bool cache = true);
  // Speculative decoding: the row's K/V holds only its first `num_computed` positions (the
  // rest were rejected proposals); its blocks past the next token's are released.
  void rollback(Sequence* seq, int num_computed);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const PrefixCacheCounts& prefix_cache_counts() const { return prefix_counts_; }
  bool idle() const { return waiting_.empty() && running_.empty(); }

 private:
  // Blocks to compute `n` more tokens (and, at admission, to hold the whole sequence in
  // full-attention groups); false when some group lacks them.
  bool grow_blocks(Sequence* seq, int n);
  // Admission: the prefix hit, then blocks for the first `budget` tokens after it (and,
  // in full-attention groups, the whole known sequence). False when some group lacks them.
  bool admit_blocks(Sequence* seq, int budget);
  // Names the sequence's blocks that now hold final, computed tokens.
  void cache_blocks(Sequence* seq);
  void release_out_of_window();
  void preempt(Sequence* seq);
  // What is left of the step for the next phase: tokens, and rows that may prefill.
  struct StepBudget {
    int tokens = 0;
    int prefills = 0;
  };
  void schedule_running(std::vector<ScheduledRow>& rows, StepBudget& budget);
  void schedule_waiting(std::vector<ScheduledRow>& rows, StepBudget& budget);

  SchedulerConfig config_;
  KvBlockManager& kv_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  int64_t num_preemptions_ = 0;
  PrefixCacheCounts prefix_counts_;
};

}  // namespace tandem
