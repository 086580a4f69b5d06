#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

Scheduler::Scheduler(SchedulerConfig config, BlockPool& pool) : config_(config), pool_(pool) {}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(seq);
}

bool Scheduler::grow_blocks(Sequence* seq, int num_tokens) {
  int need = blocks_for(num_tokens, config_.block_size) - int(seq->block_table.size());
  if (need <= 0) return true;
  if (!pool_.can_allocate(need)) return false;
  auto blocks = pool_.allocate(need);
  seq->block_table.insert(seq->block_table.end(), blocks.begin(), blocks.end());
  return true;
}

void Scheduler::preempt(Sequence* seq) {
  pool_.release(seq->block_table);
  seq->block_table.clear();
  seq->num_computed = 0;
  seq->status = SeqStatus::Waiting;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_front(seq);  // it resumes before anything newer
  num_preemptions_++;
}

void Scheduler::schedule_running(std::vector<ScheduledRow>& rows, int& budget, int& prefills) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->prefilling() && prefills >= config_.prompt_concurrency) {
      i++;
      continue;
    }
    int n = std::min(seq->num_uncomputed(), budget);
    if (n <= 0) {
      i++;
      continue;
    }
    // Free blocks by preempting the newest running sequences until this one fits.
    bool fits = grow_blocks(seq, seq->num_computed + n);
    while (!fits && running_.back() != seq) {
      Sequence* victim = running_.back();
      std::erase_if(rows, [&](const ScheduledRow& r) { return r.seq == victim; });
      preempt(victim);
      fits = grow_blocks(seq, seq->num_computed + n);
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
    // Admission: the whole known sequence's blocks must fit now.
    int need = blocks_for(seq->num_tokens(), config_.block_size);
    if (!pool_.can_allocate(need)) break;  // FIFO: nobody overtakes the head
    waiting_.pop_front();
    grow_blocks(seq, seq->num_tokens());
    seq->status = SeqStatus::Running;
    running_.push_back(seq);
    int n = std::min(seq->num_uncomputed(), budget);
    prefills++;
    rows.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    budget -= n;
  }
}

std::vector<ScheduledRow> Scheduler::schedule() {
  std::vector<ScheduledRow> rows;
  int budget = config_.max_batched_tokens, prefills = 0;
  schedule_running(rows, budget, prefills);
  schedule_waiting(rows, budget, prefills);
  return rows;
}

void Scheduler::advance(const std::vector<ScheduledRow>& rows) {
  for (auto& r : rows) r.seq->num_computed += r.num_tokens;
}

void Scheduler::finish(Sequence* seq) {
  pool_.release(seq->block_table);
  seq->block_table.clear();
  seq->status = SeqStatus::Finished;
  std::erase(running_, seq);
  std::erase(waiting_, seq);
}

}  // namespace tandem
