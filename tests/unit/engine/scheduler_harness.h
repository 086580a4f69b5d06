// The scheduler tests' harness: a Scheduler over a KvBlockManager and the sequences it
// schedules, the test playing the engine (it advances rows and appends their tokens).
#pragma once

#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace tandem::test {

struct SchedulerHarness {
  KvBlockManager kv;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;

  SchedulerHarness(KvBlockManager m, SchedulerConfig c) : kv(std::move(m)), sched(c, kv) {}

  // Queues a sequence of `prompt_len` tokens that may generate `max_tokens`.
  Sequence* add(int prompt_len, int max_tokens) {
    GenerationRequest r;
    r.prompt.assign(size_t(prompt_len), 7);
    r.max_tokens = max_tokens;
    seqs.push_back(std::make_unique<Sequence>(int64_t(seqs.size()), r, nullptr, 1));
    sched.add(seqs.back().get());
    return seqs.back().get();
  }
};

}  // namespace tandem::test
