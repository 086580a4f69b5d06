#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

Scheduler::Scheduler(SchedulerConfig config, KvBlockManager& kv) : config_(config), kv_(kv) {}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(seq);
}

bool Scheduler::grow_blocks(Sequence* seq, int n, bool admitting) {
  int end = seq->num_computed + n, reserve = admitting ? seq->num_tokens() : 0;
  std::optional<GrowPlan> plan = kv_.plan_grow(seq->block_tables, seq->num_computed, end, reserve);
  if (!plan) return false;
  kv_.apply(seq->block_tables, *plan);
  return true;
}

void Scheduler::release_out_of_window() {
  for (Sequence* seq : running_) kv_.release_out_of_window(seq->block_tables, seq->num_computed);
}

void Scheduler::preempt(Sequence* seq) {
  kv_.release(seq->block_tables);
  seq->num_computed = 0;
  seq->status = SeqStatus::Preempted;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_front(seq);  // it resumes before anything newer
  num_preemptions_++;
}

void Scheduler::schedule_running(std::vector<ScheduledRow>& rows, StepBudget& budget) {
  for (size_t i = 0; i < running_.size() && budget.tokens > 0;) {
    Sequence* seq = running_[i];
    const int n = std::min(seq->num_schedulable(), budget.tokens);
    if (n <= 0 || (seq->prefilling() && budget.prefills == 0)) {
      i++;
      continue;
    }
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
    rows.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
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
    const int n = std::min(seq->num_schedulable(), budget.tokens);
    if (n <= 0 || !grow_blocks(seq, n, /*admitting=*/true)) break;
    waiting_.pop_front();
    seq->status = SeqStatus::Running;
    running_.push_back(seq);
    budget.prefills--;
    rows.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
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

void Scheduler::finish(Sequence* seq) {
  kv_.release(seq->block_tables);
  seq->status = SeqStatus::Finished;
  std::erase(running_, seq);
  std::erase(waiting_, seq);
}

}  // namespace tandem
