// The bookkeeping of embedding rows (engine/pooling.h): which positions each pooling reads,
// runs added in order and once, and the plan's pooled tokens per row.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/pooling.h"
#include "engine/sequence.h"
#include "engine/step_plan.h"

namespace tandem {
namespace pooling_test {

TEST(Pooling, NamesRoundTripAndUnknownOnesAreRefused) {
  for (Pooling p : {Pooling::Last, Pooling::Mean, Pooling::Cls})
    EXPECT_EQ(pooling_from_name(pooling_name(p)), p);
  EXPECT_FALSE(pooling_from_name("max"));
  EXPECT_FALSE(pooling_from_name("LAST"));
}

TEST(Pooling, EachPoolingReadsItsPositions) {
  EXPECT_EQ(pooled_positions(Pooling::Last, 9).begin, 8);
  EXPECT_EQ(pooled_positions(Pooling::Last, 9).size(), 1);
  EXPECT_EQ(pooled_positions(Pooling::Cls, 9).begin, 0);
  EXPECT_EQ(pooled_positions(Pooling::Cls, 9).size(), 1);
  EXPECT_EQ(pooled_positions(Pooling::Mean, 9).size(), 9);
}

TEST(Pooling, RunsAddUpToTheMeanAndAreTakenOnce) {
  PoolingState s(Pooling::Mean, 5);
  EXPECT_EQ(s.owed().begin, 0);
  s.add(std::vector<float>{1.f, 2.f}, 2);
  EXPECT_EQ(s.owed().begin, 2);
  EXPECT_FALSE(s.done());
  EXPECT_THROW(s.vector(), Error);
  EXPECT_THROW(s.add(std::vector<float>{1.f}, 1), Error);  // another width
  s.add(std::vector<float>{4.f, 8.f}, 3);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.vector(), (std::vector<float>{1.f, 2.f}));        // (1 + 4) / 5, (2 + 8) / 5
  EXPECT_THROW(s.add(std::vector<float>{1.f, 1.f}, 1), Error);  // nothing more is owed
}

TEST(Pooling, ThePlanPoolsEachRowsOwedPositionsItComputes) {
  const std::vector<int32_t> a{5, 6, 7, 8, 9}, b{1, 2, 3}, c{4, 4};
  const BlockTables ta{{1}}, tb{{2}}, tc{{3}};
  std::vector<PlanRow> rows{
      // positions 1..4 computed, 0..4 owed: pools 1..4 (a chunk after a first one)
      {.tokens = a, .start = 1, .count = 4, .block_tables = ta, .pool_begin = 0, .pool_end = 5},
      // a generating row: pools nothing
      {.tokens = b, .start = 2, .count = 1, .block_tables = tb, .num_logits = 1},
      // the last position only, of a row that computes both
      {.tokens = c, .start = 0, .count = 2, .block_tables = tc, .pool_begin = 1, .pool_end = 2}};
  StepPlan plan = build_step_plan(rows, 16);
  EXPECT_EQ(plan.pool_index, (std::vector<int32_t>{0, 1, 2, 3, 6}));
  EXPECT_EQ(plan.pool_starts, (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(plan.sample_index, (std::vector<int32_t>{4}));
  rows.pop_back();
  rows[0].pool_end = 1;  // owed positions this step does not compute
  StepPlan none = build_step_plan(rows, 16);
  EXPECT_TRUE(none.pool_index.empty());
  EXPECT_TRUE(none.pool_starts.empty());
}

TEST(Pooling, APrefixHitStopsAtTheFirstPositionStillOwed) {
  GenerationRequest r;
  r.prompt = std::vector<int32_t>(40, 3);
  r.max_tokens = 0;
  r.pooling = Pooling::Mean;
  Sequence mean(1, r, nullptr, 0);
  EXPECT_EQ(mean.first_wanted_logits(), 0);
  mean.pooling->add(std::vector<float>(4, 1.f), 20);  // pooled before a preemption
  EXPECT_EQ(mean.first_wanted_logits(), 20);
  r.pooling = Pooling::Last;
  EXPECT_EQ(Sequence(2, r, nullptr, 0).first_wanted_logits(), 39);
  r.pooling = Pooling::Cls;
  EXPECT_EQ(Sequence(3, r, nullptr, 0).first_wanted_logits(), 0);
}

}  // namespace pooling_test
}  // namespace tandem
