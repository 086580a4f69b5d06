#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

Scheduler::Scheduler(SchedulerConfig config, KvBlockManager& kv) : config_(config), kv_(kv) {}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(seq);
}

bool Scheduler::grow_blocks(Sequence* seq, int n) {
  std::optional<GrowPlan> plan =
      kv_.plan_grow(seq->block_tables, seq->num_computed, seq->num_computed + n);
  if (!plan) return false;
  kv_.apply(seq->block_tables, *plan);
  return true;
}

bool Scheduler::admit_blocks(Sequence* seq, int budget) {
  const int bs = config_.block_size;
  seq->block_hashes.extend(seq->tokens, bs);
  // At least the last known token is computed (its row samples the next one), and every
  // position whose prompt logprob is owed.
  const PrefixHit hit = kv_.find_prefix(seq->block_hashes, seq->tokens,
                                        seq->first_wanted_logits() / bs, seq->media_ranges);
  const int start = hit.num_blocks * bs;
  const int n = seq->fit_chunk(start, std::min(seq->num_tokens() - start, budget));
  std::optional<GrowPlan> plan = kv_.plan_admit(hit, start + n, seq->num_tokens());
  if (!plan) return false;
  kv_.apply(seq->block_tables, *plan);
  seq->num_computed = start;
  seq->num_named_blocks = hit.num_blocks;
  seq->spec.reset_kv();
  if (!seq->num_cached_tokens) {
    seq->num_cached_tokens = std::min(start, seq->num_prompt);
    if (kv_.prefix_caching()) {
      prefix_counts_.queries += seq->num_prompt;
      prefix_counts_.hits += *seq->num_cached_tokens;
    }
  }
  return true;
}

void Scheduler::cache_blocks(Sequence* seq) {
  if (!kv_.prefix_caching() || seq->block_tables.empty()) return;
  const int bs = config_.block_size;
  seq->block_hashes.extend(seq->tokens, bs);
  const int final_blocks = std::min(seq->num_computed, int(seq->tokens.size())) / bs;
  const int end = std::min(final_blocks, seq->block_hashes.size());
  if (end <= seq->num_named_blocks) return;
  kv_.cache_blocks(seq->block_tables, seq->block_hashes, seq->tokens, seq->num_named_blocks, end);
  seq->num_named_blocks = end;
}

void Scheduler::release_out_of_window() {
  // Blocks wholly inside the prompt stay cached when they leave the window: a request
  // sharing part of this prompt can start there.
  for (Sequence* seq : running_) {
    cache_blocks(seq);
    kv_.release_out_of_window(seq->block_tables, seq->num_computed,
                              seq->num_prompt / config_.block_size);
  }
}

void Scheduler::preempt(Sequence* seq) {
  cache_blocks(seq);
  kv_.release(seq->block_tables);
  seq->num_computed = 0;
  seq->num_named_blocks = 0;
  seq->spec.reset_kv();
  seq->status = SeqStatus::Preempted;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_front(seq);  // it resumes before anything newer
  num_preemptions_++;
}

void Scheduler::schedule_running(std::vector<ScheduledRow>& rows, StepBudget& budget) {
  for (size_t i = 0; i < running_.size() && budget.tokens > 0;) {
    Sequence* seq = running_[i];
    int n = seq->fit_chunk(seq->num_computed, std::min(seq->num_schedulable(), budget.tokens));
    if (n <= 0 || (seq->prefilling() && budget.prefills == 0)) {
      i++;
      continue;
    }
    // Proposals take what is left of the budget after the row's own token, and blocks only
    // where the pools have them.
    int num_draft = std::min(seq->spec.num_draft, budget.tokens - n);
    if (num_draft > 0 && grow_blocks(seq, n + num_draft)) n += num_draft;
    else num_draft = 0;
    // Free blocks by preempting the newest running sequences (none scheduled yet: they
    // come after this one) until this one fits.
    bool fits = grow_blocks(seq, n);
    while (!fits && running_.back() != seq) {
      preempt(running_.back());
      fits = grow_blocks(seq, n);
    }
    if (!fits) {  // it is the newest itself: it waits for others to finish
      preempt(seq);
      continue;
    }
    if (seq->prefilling()) budget.prefills--;
    rows.push_back({seq, n, seq->samples_after(n - num_draft), num_draft});
    budget.tokens -= n;
    i++;
  }
}

void Scheduler::schedule_waiting(std::vector<ScheduledRow>& rows, StepBudget& budget) {
  while (!waiting_.empty() && budget.tokens > 0 && int(running_.size()) < config_.max_rows &&
         budget.prefills > 0) {
    Sequence* seq = waiting_.front();
    // Admission: the full-attention groups must hold the whole known sequence now, the
    // window groups what its first chunk computes. FIFO: nobody overtakes the head, not
    // even past one whose last token is still in flight (it finishes when that arrives).
    if (seq->num_schedulable() <= 0 || !admit_blocks(seq, budget.tokens)) break;
    const int n =
        seq->fit_chunk(seq->num_computed, std::min(seq->num_schedulable(), budget.tokens));
    waiting_.pop_front();
    seq->status = SeqStatus::Running;
    running_.push_back(seq);
    budget.prefills--;
    rows.push_back({seq, n, seq->samples_after(n)});
    budget.tokens -= n;
  }
}

std::vector<ScheduledRow> Scheduler::schedule() {
  std::vector<ScheduledRow> rows;
  StepBudget budget{config_.max_batched_tokens, config_.prompt_concurrency};
  release_out_of_window();
  schedule_running(rows, budget);
  schedule_waiting(rows, budget);
  return rows;
}

void Scheduler::advance(const std::vector<ScheduledRow>& rows) {
  for (auto& r : rows) r.seq->num_computed += r.num_tokens;
}

void Scheduler::rollback(Sequence* seq, int num_computed) {
  TANDEM_CHECK(num_computed <= seq->num_computed, "sequence {}: rollback to {} past {}", seq->id,
               num_computed, seq->num_computed);
  seq->num_computed = num_computed;
  kv_.truncate(seq->block_tables, num_computed + 1);
}

void Scheduler::finish(Sequence* seq, bool cache) {
  if (cache) cache_blocks(seq);
  kv_.release(seq->block_tables);
  seq->status = SeqStatus::Finished;
  std::erase(running_, seq);
  std::erase(waiting_, seq);
}

}  // namespace tandem
