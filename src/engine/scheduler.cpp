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
  seq->status = SeqStatus::Waiting;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_front(seq);  // it resumes before anything newer
  num_preemptions_++;
}

void Scheduler::schedule_running(std::vector<ScheduledRow>& rows, int& budget, int& prefills) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->awaiting_last || (seq->prefilling() && prefills >= config_.prompt_concurrency)) {
      i++;
      continue;
    }
    int n = std::min(seq->num_uncomputed(), budget);
    if (n <= 0) {
      i++;
      continue;
    }
    // Free blocks by preempting the newest running sequences until this one fits.
    bool fits = grow_blocks(seq, n);
    while (!fits && running_.back() != seq) {
      Sequence* victim = running_.back();
      std::erase_if(rows, [&](const ScheduledRow& r) { return r.seq == victim; });
      preempt(victim);
      fits = grow_blocks(seq, n);
    }
    if (!fits) {  // it is the newest itself: it waits for others to finish
      preempt(seq);
      continue;
    }
    if (seq->prefilling()) prefills++;
    rows.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    budget -= n;
    i++;
  }
}

void Scheduler::schedule_waiting(std::vector<ScheduledRow>& rows, int& budget, int& prefills) {
  while (!waiting_.empty() && budget > 0 && int(running_.size()) < config_.max_rows &&
         prefills < config_.prompt_concurrency) {
    Sequence* seq = waiting_.front();
    if (seq->awaiting_last) break;  // finishes when its last token arrives
    // Admission: the full-attention groups must hold the whole known sequence now, the
    // window groups what its first chunk computes.
    int n = std::min(seq->num_uncomputed(), budget);
    if (!grow_blocks(seq, n, /*admitting=*/true)) break;  // FIFO: nobody overtakes the head
    waiting_.pop_front();
    seq->status = SeqStatus::Running;
    running_.push_back(seq);
    prefills++;
    rows.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    budget -= n;
  }
}

std::vector<ScheduledRow> Scheduler::schedule() {
  std::vector<ScheduledRow> rows;
  int budget = config_.max_batched_tokens, prefills = 0;
  release_out_of_window();
  schedule_running(rows, budget, prefills);
  schedule_waiting(rows, budget, prefills);
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
