// The scheduler over a full-attention group and a sliding-window group, no model: the
// test plays the runner. Every step it checks, against "a query at p sees keys
// (p − window, p]", that the window group holds every block the step reads or writes
// and nothing older, while the full group keeps the whole sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "engine/scheduler.h"
#include "kv/kv_budget.h"
#include "scheduler_harness.h"

namespace tandem {
namespace window_scheduler_test {

constexpr int kWindow = 8, kBlock = 4;
constexpr int32_t kNull = BlockPool::kNullBlock;

KvSizing sizing(int rows, int step_tokens) {
  KvSizing s;
  s.block_size = kBlock;
  s.max_rows = rows;
  s.max_batched_tokens = step_tokens;
  s.max_model_len = 1 << 16;
  return s;
}

// Group 0: full attention with `full_blocks`; group 1: window 8 sized for `rows` rows.
KvBlockManager gemma_like(int full_blocks, const KvSizing& s) {
  std::vector<KvLayerKind> layers{{kWindow}, {kWindow}, {0}};
  return KvBlockManager(make_kv_groups(layers),
                        std::vector<int>{full_blocks, window_group_blocks(kWindow, s.max_rows, s)},
                        kBlock);
}

struct WindowRun : test::SchedulerHarness {
  using SchedulerHarness::SchedulerHarness;

  // Plans one step, checks every scheduled row's tables, then plays the runner and
  // finishes rows that reached max_tokens.
  std::vector<ScheduledRow> step() {
    auto rows = sched.schedule();
    for (auto& r : rows) check_tables(*r.seq, r.num_tokens);
    check_usage();
    sched.advance(rows);
    for (auto& r : rows) {
      if (!r.sample) continue;
      r.seq->tokens.push_back(1);
      if (r.seq->num_generated() >= r.seq->request.max_tokens) sched.finish(r.seq);
    }
    return rows;
  }
  void check_tables(const Sequence& s, int n) const {
    ASSERT_EQ(s.block_tables.size(), 2u);
    const auto& full = s.block_tables[0];
    const auto& window = s.block_tables[1];
    int nc = s.num_computed, end = nc + n;
    ASSERT_GE(int(full.size()) * kBlock, end);
    for (int32_t b : full) ASSERT_NE(b, kNull);
    ASSERT_GE(int(window.size()) * kBlock, end);
    // Every key a query of this step reads, and every key it writes, is in a live block.
    for (int key = std::max(0, nc - kWindow + 1); key < end; key++)
      ASSERT_NE(window[size_t(key / kBlock)], kNull) << "key " << key << " at " << nc;
    // Every live block holds a key the step can still see.
    for (size_t i = 0; i < window.size(); i++) {
      if (window[i] == kNull) continue;
      ASSERT_GE(int(i + 1) * kBlock - 1, nc - kWindow + 1) << "block " << i << " at " << nc;
    }
  }
  // The pools' counts are exactly the live entries of the running tables.
  void check_usage() const {
    int live[2] = {0, 0};
    for (Sequence* s : sched.running())
      for (int g = 0; g < 2; g++)
        for (int32_t b : s->block_tables[size_t(g)]) live[g] += b != kNull;
    EXPECT_EQ(kv.pool(0).num_used(), live[0]);
    EXPECT_EQ(kv.pool(1).num_used(), live[1]);
  }
  void run_to_end() {
    for (int i = 0; i < 10000 && !sched.idle(); i++) step();
    ASSERT_TRUE(sched.idle());
    EXPECT_EQ(kv.num_used(), 0);
  }
};

SchedulerConfig config(int rows, int step_tokens) {
  return {.max_rows = rows, .max_batched_tokens = step_tokens, .block_size = kBlock};
}

TEST(WindowScheduler, LongSequenceKeepsAWindowsWorthOfBlocks) {
  WindowRun run(gemma_like(64, sizing(1, 4)), config(1, 4));
  Sequence* s = run.add(30, 60);  // prefill in chunks of 4, then decode to 90 tokens
  int most_window = 0;
  while (!run.sched.idle()) {
    run.step();
    if (run.sched.idle()) break;
    most_window = std::max(most_window, run.kv.pool(1).num_used());
    // Full attention holds the whole prompt (reserved at admission) and everything
    // computed; the window group does not grow with the sequence.
    EXPECT_EQ(run.kv.pool(0).num_used(),
              blocks_for(std::max(s->num_computed, s->num_prompt), kBlock));
  }
  // A step at c computing up to 4 tokens sees keys (c − 8, c + 4): 11 positions, at most
  // 4 blocks of 4.
  EXPECT_LE(most_window, 4);
  EXPECT_EQ(s->num_generated(), 60);
  EXPECT_EQ(run.kv.num_used(), 0);
}

TEST(WindowScheduler, BatchOfJoiningRowsNeverWaitsOnTheWindowGroup) {
  // The full group is ample, so any preemption would come from the window group, which
  // is sized to never need one.
  std::mt19937 rng(3);
  WindowRun run(gemma_like(4096, sizing(4, 7)), config(4, 7));
  for (int i = 0; i < 12; i++) {
    run.add(1 + int(rng() % 40), 1 + int(rng() % 30));
    run.step();
  }
  run.run_to_end();
  EXPECT_EQ(run.sched.num_preemptions(), 0);
}

TEST(WindowScheduler, PreemptionUnderATightFullGroupFreesEveryGroup) {
  std::mt19937 rng(5);
  WindowRun run(gemma_like(24, sizing(4, 7)), config(4, 7));  // 23 blocks: 92 tokens for 4 rows
  std::vector<Sequence*> all;
  for (int i = 0; i < 8; i++) all.push_back(run.add(10 + int(rng() % 30), 20 + int(rng() % 20)));
  run.run_to_end();
  EXPECT_GT(run.sched.num_preemptions(), 0);
  for (Sequence* s : all) {
    EXPECT_EQ(s->status, SeqStatus::Finished);
    EXPECT_EQ(s->num_generated(), s->request.max_tokens);
    EXPECT_TRUE(s->block_tables.empty());
  }
}

TEST(WindowScheduler, SlidingOnlyModelRunsPastItsPoolSize) {
  // Mistral-like: every layer slides. One row's window group holds a few blocks, fewer
  // than 200 tokens need, yet a 200-token sequence runs: only the window is resident.
  KvSizing s = sizing(1, 4);
  std::vector<KvLayerKind> layers{{kWindow}};
  int blocks = window_group_blocks(kWindow, 1, s);
  ASSERT_LT((blocks - 1) * kBlock, 200);
  KvBlockManager kv(make_kv_groups(layers), std::vector<int>{blocks}, kBlock);
  Scheduler sched(config(1, 4), kv);
  GenerationRequest r;
  r.prompt.assign(50, 7);
  Sequence seq(0, r, nullptr, 1);
  sched.add(&seq);
  while (seq.num_tokens() < 200) {
    auto rows = sched.schedule();
    ASSERT_EQ(rows.size(), 1u);
    sched.advance(rows);
    if (rows[0].sample) seq.tokens.push_back(1);
  }
  EXPECT_EQ(sched.num_preemptions(), 0);
  sched.finish(&seq);
  EXPECT_EQ(kv.num_used(), 0);
}

}  // namespace window_scheduler_test
}  // namespace tandem
