// build_step_plan's overlap contract: a row whose last position is a token still in flight
// gets a placeholder and a feed entry naming its row in the previous sampling op; the
// Sequence says how much of itself may be scheduled while a token is in flight.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/sequence.h"
#include "engine/step_plan.h"

namespace tandem {
namespace step_plan_test {

TEST(StepPlan, InFlightTokenIsFedFromThePreviousSamplingOp) {
  const std::vector<int32_t> a{5, 6, 7}, b{9, 8, 7, 6, 5};
  const BlockTables ta{{1}}, tb{{2}};
  std::vector<PlanRow> rows{
      {.tokens = a, .start = 2, .count = 2, .block_tables = ta, .num_logits = 1, .feed_from = 3},
      {.tokens = b, .start = 4, .count = 1, .block_tables = tb, .num_logits = 1}};
  StepPlan plan = build_step_plan(rows, 16);
  EXPECT_EQ(plan.tokens, (std::vector<int32_t>{7, 0, 5}));
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(plan.feed_index, (std::vector<int32_t>{1}));
  EXPECT_EQ(plan.feed_source, (std::vector<int32_t>{3}));
  EXPECT_EQ(plan.sample_index, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(plan.groups[0].slot_map, (std::vector<int32_t>{16 + 2, 16 + 3, 32 + 4}));
}

TEST(StepPlan, AnUnknownTokenWithoutASourceIsRefused) {
  const std::vector<int32_t> a{5, 6, 7};
  const BlockTables t{{1}};
  PlanRow row{.tokens = a, .start = 2, .count = 2, .block_tables = t, .num_logits = 1};
  EXPECT_THROW(build_step_plan(std::span<const PlanRow>(&row, 1), 16), Error);
  row.feed_from = 0;
  row.count = 3;  // two positions past what the host knows: never a plan's shape
  EXPECT_THROW(build_step_plan(std::span<const PlanRow>(&row, 1), 16), Error);
}

TEST(StepPlan, ALastTokenInFlightLeavesNothingToSchedule) {
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 2;
  Sequence seq(1, r, nullptr, 0);
  EXPECT_EQ(seq.num_schedulable(), 3);  // the prompt
  seq.num_computed = 3;
  seq.num_in_flight = 1;  // the first generated token, on its way
  seq.in_flight_row = 0;
  EXPECT_EQ(seq.num_tokens(), 4);
  EXPECT_EQ(seq.num_schedulable(), 1);  // it can be computed (fed from the device)
  seq.num_computed = 4;
  seq.num_in_flight = 2;  // the last allowed token is in flight too: nothing reads its K/V
  EXPECT_EQ(seq.num_schedulable(), 0);
  seq.receive(11);
  EXPECT_EQ(seq.tokens, (std::vector<int32_t>{1, 2, 3, 11}));
  EXPECT_TRUE(seq.in_flight_row.has_value());  // the second is still on its way
  seq.receive(12);
  EXPECT_FALSE(seq.in_flight_row.has_value());
  EXPECT_EQ(seq.num_generated(), 2);
}

}  // namespace step_plan_test
}  // namespace tandem
