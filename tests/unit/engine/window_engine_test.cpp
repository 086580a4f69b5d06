// The engine on windowed oracle models (Gemma 2: full + sliding layers; Mistral: every
// layer slides, window 24, blocks of 16): the window group stays bounded while the full
// group grows, preemption and recompute give identical output, a row's logits do not
// depend on other rows even when they reuse the blocks it released, and every block is
// free at the end.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "../kv/grow_tables.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "engine/model_runner.h"
#include "engine/teacher_forcing.h"
#include "engine_test_util.h"
#include "model/config.h"

namespace tandem {
namespace window_engine_test {

constexpr int kWindow = 24;  // sliding_window of both fixtures

std::unique_ptr<Engine> make_engine(const char* arch, EngineConfig config) {
  return test::cpu_engine(arch, config);
}

using test::drain;
using test::greedy;
using test::prompt_of;

TEST(WindowEngine, WindowGroupStaysBoundedWhileFullGroupGrows) {
  for (bool caching : {false, true}) {
    SCOPED_TRACE(caching ? "prefix caching" : "no prefix caching");
    auto engine = make_engine("gemma2", {.enable_prefix_caching = caching});
    const KvBlockManager& kv = engine->kv_blocks();
    ASSERT_EQ(kv.num_groups(), 2);
    ASSERT_EQ(kv.groups().groups[1].window, kWindow);
    auto s = engine->submit(greedy(prompt_of(20, 1), 60));
    int most_window = 0, most_full = 0;
    while (engine->step()) {
      most_window = std::max(most_window, kv.pool(1).num_used());
      most_full = std::max(most_full, kv.pool(0).num_used());
    }
    // A decode step at c sees keys (c − 24, c]: 25 positions, at most 3 blocks of 16. The
    // prefix cache holds one block more behind the window: (c − 40, c], at most 4.
    EXPECT_LE(most_window, caching ? 4 : 3);
    EXPECT_EQ(most_full, blocks_for(20 + 60 - 1, 16));  // the last token is never computed
    EXPECT_EQ(drain(*s).size(), 60u);
    EXPECT_EQ(kv.num_used(), 0);
  }
}

// /stats reads each group's blocks from EngineStats::kv_groups: they must be the pools'
// own counts after every step, and add up to the totals.
TEST(WindowEngine, StatsReportEachGroupsBlocks) {
  auto engine = make_engine("gemma2", {});
  const KvBlockManager& kv = engine->kv_blocks();
  auto s = engine->submit(greedy(prompt_of(20, 1), 60));
  bool full_outgrew_window = false;
  while (engine->step()) {
    EngineStats st = engine->stats();
    ASSERT_EQ(st.kv_groups.size(), 2u);
    EXPECT_EQ(st.kv_groups[0].window, 0);
    EXPECT_EQ(st.kv_groups[1].window, kWindow);
    int64_t used = 0, total = 0;
    for (int g = 0; g < 2; g++) {
      const KvGroupStats& gs = st.kv_groups[size_t(g)];
      EXPECT_EQ(gs.used, kv.pool(g).num_used()) << "group " << g;
      EXPECT_EQ(gs.total, kv.pool(g).capacity()) << "group " << g;
      used += gs.used;
      total += gs.total;
    }
    EXPECT_EQ(used, st.kv_blocks_used);
    EXPECT_EQ(total, st.kv_blocks_total);
    full_outgrew_window |= st.kv_groups[0].used > st.kv_groups[1].used;
  }
  EXPECT_TRUE(full_outgrew_window);
  EXPECT_EQ(drain(*s).size(), 60u);
  for (const KvGroupStats& gs : engine->stats().kv_groups) EXPECT_EQ(gs.used, 0);
}

// Four requests under a KV budget too small for all of them: the newest are preempted
// and recomputed, and every request's output equals its solo run.
void expect_preemption_is_invisible(const char* arch, int64_t budget, int step_tokens) {
  EngineConfig tight;
  tight.scheduler.max_rows = 4;
  tight.scheduler.max_batched_tokens = step_tokens;
  tight.kv_budget_bytes = budget;
  test::expect_preemption_is_invisible(arch, tight);
}

// What one block id of each group costs, and the window group's size, for a model.
struct Costs {
  std::vector<int64_t> bytes;  // [G]
  KvSizing sizing;
};

Costs costs_of(const char* arch, int rows, int step_tokens) {
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model(arch), *backend);
  Costs c;
  c.sizing.block_size = 16;
  c.sizing.max_rows = rows;
  c.sizing.max_batched_tokens = step_tokens;
  c.sizing.max_model_len = model->config().max_position_embeddings;
  auto specs = model->kv_specs();
  c.bytes = group_block_bytes(specs, kv_groups_of(specs), 16, DType::F32);
  return c;
}

TEST(WindowEngine, PreemptionUnderATightFullGroupIsInvisible) {
  Costs c = costs_of("gemma2", 4, 2048);
  // Window group at its full size; 8 usable full blocks, which four ~50-token rows overrun.
  int64_t budget = window_group_blocks(kWindow, 4, c.sizing) * c.bytes[1] + 9 * c.bytes[0] - 1;
  expect_preemption_is_invisible("gemma2", budget, 2048);
}

TEST(WindowEngine, PreemptionUnderATightWindowGroupIsInvisible) {
  // Mistral has only a window group. A budget for one row's window makes four rows
  // take turns.
  Costs c = costs_of("mistral", 4, 16);
  int64_t budget = window_group_blocks(kWindow, 1, c.sizing) * c.bytes[0];
  expect_preemption_is_invisible("mistral", budget, 16);
}

// Teacher-forces row x token by token while y and z join in chunks; the window group is
// so small that y and z run on blocks x released. x's logits must equal its solo
// teacher-forced logits (which release nothing) at every step.
TEST(WindowEngine, RowLogitsHoldWhenOtherRowsReuseReleasedBlocks) {
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model("gemma2"), *backend);
  std::vector<int32_t> x = prompt_of(40, 5), y = prompt_of(60, 9), z = prompt_of(33, 4);
  Tensor solo = teacher_forced_logits(*model, *backend, x);
  const int V = model->config().vocab_size, bs = 16;
  // Each row's step sees at most 3 blocks of the window group: 9 usable blocks serve all
  // three, while holding every block of them would take 3 + 4 + 3.
  KvBlockManager kv(kv_groups_of(model->kv_specs()), std::vector<int>{16, 10}, bs);
  ModelRunner runner(*model, *backend, kv.num_blocks(), bs);
  BlockTables xt, yt, zt;
  int y_done = 0, z_done = 0, released = 0;
  double worst = 0;
  for (int p = 0; p < 40; p++) {
    released += kv.release_out_of_window(xt, p) + kv.release_out_of_window(yt, y_done) +
                kv.release_out_of_window(zt, z_done);
    std::vector<PlanRow> rows;
    if (p >= 10 && y_done < 60) {  // y joins at step 10 in chunks of 5, then leaves
      int n = std::min(5, 60 - y_done);
      test::grow(kv, yt, y_done, y_done + n);
      rows.push_back({y, y_done, n, yt, 1});
      y_done += n;
    }
    test::grow(kv, xt, p, p + 1);
    rows.push_back({x, p, 1, xt, 1});
    if (p % 3 == 0 && z_done < 33) {  // z advances every third step
      int n = std::min(4, 33 - z_done);
      test::grow(kv, zt, z_done, z_done + n);
      rows.push_back({z, z_done, n, zt, 2});
      z_done += n;
    }
    Tensor logits = backend->to_host_f32(runner.forward(build_step_plan(rows, bs)));
    int x_row = rows[0].tokens.data() == y.data() ? 1 : 0;
    worst = std::max(worst, test::relative_error(logits.ptr<float>() + int64_t(x_row) * V,
                                                 solo.ptr<float>() + int64_t(p) * V, V));
  }
  EXPECT_GT(released, 0);
  EXPECT_LE(worst, 1e-5);
  kv.release(xt);
  kv.release(yt);
  kv.release(zt);
  EXPECT_EQ(kv.num_used(), 0);
}

}  // namespace window_engine_test
}  // namespace tandem
