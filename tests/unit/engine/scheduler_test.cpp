// Scheduler unit tests: no model; the test plays the runner (advance + append a token).
#include <gtest/gtest.h>

#include <memory>

#include "engine/scheduler.h"
#include "scheduler_harness.h"

namespace tandem {
namespace scheduler_test {

// One full-attention group of `num_blocks` blocks: the layout of a model without windows.
KvBlockManager full_attention(int num_blocks, int block_size) {
  std::vector<KvLayerKind> layers{{0}};
  return KvBlockManager(make_kv_groups(layers), std::vector<int>{num_blocks}, block_size);
}

struct Harness : test::SchedulerHarness {
  Harness(int num_blocks, SchedulerConfig c)
      : SchedulerHarness(full_attention(num_blocks, c.block_size), c) {}
  Harness(KvBlockManager kv, SchedulerConfig c) : SchedulerHarness(std::move(kv), c) {}

  Sequence* add(int prompt_len, int max_tokens = 100) {
    return SchedulerHarness::add(prompt_len, max_tokens);
  }
  // One step as the engine runs it: plan, compute, append a token to sampled rows.
  std::vector<ScheduledRow> step() {
    auto rows = sched.schedule();
    sched.advance(rows);
    for (auto& r : rows)
      if (r.sample) r.seq->tokens.push_back(1);
    return rows;
  }
};

SchedulerConfig config(int rows, int budget, int block_size = 4) {
  return {.max_rows = rows, .max_batched_tokens = budget, .block_size = block_size};
}

TEST(Scheduler, LongPromptIsChunkedUnderTheBudget) {
  Harness h(32, config(4, 4));
  Sequence* a = h.add(10);
  auto r1 = h.step();
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].num_tokens, 4);
  EXPECT_FALSE(r1[0].sample);
  EXPECT_EQ(h.step()[0].num_tokens, 4);
  auto r3 = h.step();
  EXPECT_EQ(r3[0].num_tokens, 2);
  EXPECT_TRUE(r3[0].sample);
  EXPECT_EQ(a->num_generated(), 1);
}

TEST(Scheduler, LateRequestJoinsTheNextStep) {
  Harness h(32, config(4, 64));
  Sequence* a = h.add(5);
  h.step();
  Sequence* b = h.add(3);
  auto rows = h.step();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].seq, a);
  EXPECT_EQ(rows[0].num_tokens, 1);  // decoding
  EXPECT_EQ(rows[1].seq, b);
  EXPECT_EQ(rows[1].num_tokens, 3);  // its whole prompt, in the same forward
}

TEST(Scheduler, FinishedRowsLeaveAndFreeTheirBlocks) {
  Harness h(32, config(4, 64));
  Sequence* a = h.add(9);
  Sequence* b = h.add(3);
  h.step();
  EXPECT_GT(h.kv.num_used(), 0);
  h.sched.finish(a);
  auto rows = h.step();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].seq, b);
  h.sched.finish(b);
  EXPECT_EQ(h.kv.num_used(), 0);
  EXPECT_TRUE(h.sched.idle());
}

TEST(Scheduler, RowCapHoldsBackLaterRequests) {
  Harness h(64, config(2, 64));
  h.add(3);
  h.add(3);
  Sequence* c = h.add(3);
  EXPECT_EQ(h.step().size(), 2u);
  EXPECT_EQ(c->status, SeqStatus::Waiting);
}

TEST(Scheduler, NewestIsPreemptedWhenBlocksRunOut) {
  // 4 usable blocks of 4 tokens; two sequences of 8 tokens fill them.
  Harness h(5, config(4, 64));
  Sequence* a = h.add(8);
  Sequence* b = h.add(8);
  h.step();  // both prefill, each appends a 9th token: each needs a 3rd block
  auto rows = h.step();
  EXPECT_EQ(h.sched.num_preemptions(), 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].seq, a);
  EXPECT_EQ(b->status, SeqStatus::Preempted);  // waiting again, not a fresh arrival
  EXPECT_EQ(b->num_computed, 0);      // recomputed from scratch later
  EXPECT_EQ(b->num_tokens(), 9);      // nothing it generated is lost
  h.sched.finish(a);
  rows = h.step();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].seq, b);
  EXPECT_EQ(rows[0].num_tokens, 9);   // prompt + its generated token, recomputed
  EXPECT_TRUE(rows[0].sample);
  EXPECT_EQ(b->status, SeqStatus::Running);
  h.sched.finish(b);
  EXPECT_EQ(h.kv.num_used(), 0);
}

TEST(Scheduler, WaitingQueueIsFifo) {
  Harness h(5, config(4, 64));  // 4 blocks = 16 tokens
  h.add(12);                    // takes 3 blocks
  h.step();
  Sequence* big = h.add(8);     // needs 2: does not fit yet
  Sequence* small = h.add(2);   // would fit, but must not overtake `big`
  h.step();
  EXPECT_EQ(big->status, SeqStatus::Waiting);
  EXPECT_EQ(small->status, SeqStatus::Waiting);
}

TEST(Scheduler, PromptConcurrencyCapsPrefillingRows) {
  SchedulerConfig c = config(8, 64);
  c.prompt_concurrency = 2;
  Harness h(64, c);
  for (int i = 0; i < 4; i++) h.add(3);
  EXPECT_EQ(h.step().size(), 2u);
  EXPECT_EQ(h.step().size(), 4u);  // two decoding + two new prefills
}

}  // namespace scheduler_test
}  // namespace tandem
