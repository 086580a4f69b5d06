// Images in the step plan and the scheduler: each image token's image end and each image's
// soft-token rows reach the plan; a step that would split an image is refused; the
// scheduler cuts a chunk before an image or stretches it over the image (over the token
// budget), so no image is ever split, also with prefix-cache hits.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/scheduler.h"
#include "engine/step_plan.h"

namespace tandem {
namespace media_plan_test {

std::shared_ptr<const ImageInput> image_of(int soft_tokens, uint64_t hash) {
  auto im = std::make_shared<ImageInput>();
  im->num_soft_tokens = soft_tokens;
  im->content_hash = hash;
  return im;
}

TEST(MediaPlan, SpansAndSoftTokenRowsReachThePlan) {
  const std::vector<int32_t> a(40, 9), b(10, 3);
  const std::vector<MediaSpan> media{{4, 6, image_of(6, 1)}, {20, 5, image_of(5, 2)}};
  const BlockTables ta{{1, 2, 3}}, tb{{4}};
  std::vector<PlanRow> rows{
      {.tokens = b, .start = 0, .count = 10, .block_tables = tb, .num_logits = 1},
      {.tokens = a, .start = 2, .count = 24, .block_tables = ta, .num_logits = 1, .media = media}};
  const StepPlan plan = build_step_plan(rows, 16);
  ASSERT_EQ(plan.media.size(), 2u);
  EXPECT_EQ(plan.media[0].first_token, 10 + (4 - 2));
  EXPECT_EQ(plan.media[0].image, media[0].image);
  EXPECT_EQ(plan.media[1].first_token, 10 + (20 - 2));
  ASSERT_EQ(plan.media_ends.size(), plan.tokens.size());
  for (size_t t = 0; t < plan.tokens.size(); t++) {
    const int p = plan.positions[t];
    const bool first_row = t < 10;
    int want = 0;
    if (!first_row && p >= 4 && p < 10) want = 10;
    if (!first_row && p >= 20 && p < 25) want = 25;
    EXPECT_EQ(plan.media_ends[t], want) << "token " << t;
  }
}

TEST(MediaPlan, AStepWithoutImagesHasNoSpans) {
  const std::vector<int32_t> a(40, 9);
  const std::vector<MediaSpan> media{{4, 6, image_of(6, 1)}};
  const BlockTables ta{{1, 2, 3}};
  PlanRow row{
      .tokens = a, .start = 16, .count = 8, .block_tables = ta, .num_logits = 1, .media = media};
  const StepPlan plan = build_step_plan(std::span<const PlanRow>(&row, 1), 16);
  EXPECT_TRUE(plan.media.empty());
  EXPECT_TRUE(plan.media_ends.empty());
}

TEST(MediaPlan, AStepThatSplitsAnImageIsRefused) {
  const std::vector<int32_t> a(40, 9);
  const std::vector<MediaSpan> media{{4, 6, image_of(6, 1)}};
  const BlockTables ta{{1, 2, 3}};
  PlanRow row{
      .tokens = a, .start = 0, .count = 7, .block_tables = ta, .num_logits = 1, .media = media};
  EXPECT_THROW(build_step_plan(std::span<const PlanRow>(&row, 1), 16), Error);
  row.start = 6;  // starts inside it
  row.count = 10;
  EXPECT_THROW(build_step_plan(std::span<const PlanRow>(&row, 1), 16), Error);
}

TEST(MediaPlan, FitChunkCutsBeforeAnImageOrTakesItWhole) {
  GenerationRequest r;
  r.prompt.assign(100, 7);
  r.media = {{10, 20, image_of(20, 1)}, {40, 30, image_of(30, 2)}};
  Sequence seq(1, r, nullptr, 1);
  EXPECT_EQ(seq.fit_chunk(0, 8), 8);     // before the first image
  EXPECT_EQ(seq.fit_chunk(0, 16), 10);   // would end inside it: cut before it
  EXPECT_EQ(seq.fit_chunk(10, 16), 20);  // starts at it: the whole image, over budget
  EXPECT_EQ(seq.fit_chunk(30, 16), 10);  // cut before the second
  EXPECT_EQ(seq.fit_chunk(40, 1), 30);
  EXPECT_EQ(seq.fit_chunk(70, 16), 16);
  EXPECT_EQ(seq.fit_chunk(0, 100), 100);
}

// Every step the scheduler plans for image sequences under a 16-token budget: no row
// ends inside an image, whatever the prompts' layout.
TEST(MediaPlan, TheSchedulerNeverSplitsAnImage) {
  const std::vector<KvLayerKind> layers{{0, std::nullopt}, {8, std::nullopt}};
  const KvGroups groups = make_kv_groups(layers);
  const std::vector<int> blocks(size_t(groups.num_groups()), 200);
  KvBlockManager kv(groups, blocks, 16, /*prefix_caching=*/true);
  Scheduler sched({.max_rows = 4, .max_batched_tokens = 16, .prompt_concurrency = 4}, kv);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 4; i++) {
    GenerationRequest r;
    r.prompt.assign(size_t(60 + 7 * i), 7);
    r.media = {{3 + i, 20 + 3 * i, image_of(20 + 3 * i, uint64_t(i % 2))}};
    r.max_tokens = 3;
    seqs.push_back(std::make_unique<Sequence>(i, r, nullptr, 1));
    sched.add(seqs.back().get());
  }
  for (int step = 0; step < 200 && !sched.idle(); step++) {
    const std::vector<ScheduledRow> rows = sched.schedule();
    for (const ScheduledRow& row : rows) {
      const int end = row.seq->num_computed + row.num_tokens;
      for (const TokenRange& m : row.seq->media_ranges)
        EXPECT_FALSE(m.begin < end && end < m.end)
            << "a step ends at " << end << " inside [" << m.begin << ", " << m.end << ")";
    }
    sched.advance(rows);
    for (const ScheduledRow& row : rows) {
      if (row.seq->num_computed >= row.seq->num_tokens()) row.seq->tokens.push_back(7);
      if (row.seq->num_generated() >= row.seq->request.max_tokens) sched.finish(row.seq);
    }
  }
  EXPECT_TRUE(sched.idle());
}

}  // namespace media_plan_test
}  // namespace tandem
