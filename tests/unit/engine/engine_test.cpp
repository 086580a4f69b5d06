// The engine on a real (tiny, oracle) model: preemption keeps outputs identical,
// cancellation frees blocks, impossible requests are refused, and a row's logits do not
// depend on which other rows share its steps (gate 2 of docs/DESIGN.md §6).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/teacher_forcing.h"
#include "engine/verify_graphs.h"
#include "engine_test_util.h"
#include "model/config.h"

namespace tandem {
namespace engine_test {

std::unique_ptr<Engine> make_engine(EngineConfig config) { return test::cpu_engine("llama", config); }

using test::drain;
using test::greedy;
using test::prompt_of;

TEST(Engine, PreemptedRequestsFinishWithIdenticalOutput) {
  EngineConfig tight;
  tight.scheduler.max_rows = 4;
  tight.scheduler.block_size = 16;
  // 9 blocks of 16 tokens: four rows of ~50 tokens cannot all stay resident.
  tight.kv_budget_bytes = 9 * test::kv_block_bytes("llama", DType::F32) - 1;
  test::expect_preemption_is_invisible("llama", tight);
}

TEST(Engine, PromptLongerThanTheStepBudgetRunsInChunksAlone) {
  // Steps that only prefill sample nothing; the output equals an unchunked run.
  auto ref = make_engine({});
  auto solo = ref->submit(greedy(prompt_of(40, 3), 10));
  ref->run_until_idle();
  EngineConfig chunked;
  chunked.scheduler.max_batched_tokens = 16;
  auto engine = make_engine(chunked);
  auto s = engine->submit(greedy(prompt_of(40, 3), 10));
  engine->run_until_idle();
  std::optional<FinishReason> finish;
  EXPECT_EQ(drain(*s, &finish), drain(*solo));
  EXPECT_EQ(finish, FinishReason::Length);
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

TEST(Engine, CancelledRequestStopsAndFreesItsBlocks) {
  auto engine = make_engine({});
  auto s = engine->submit(greedy(prompt_of(10, 1), 50));
  engine->step();
  engine->step();
  EXPECT_GT(engine->kv_blocks().num_used(), 0);
  s->cancel();
  engine->step();
  std::optional<FinishReason> finish;
  auto ids = drain(*s, &finish);
  EXPECT_EQ(finish, FinishReason::Cancelled);
  EXPECT_LT(ids.size(), 50u);
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

TEST(Engine, RefusesWhatCanNeverFit) {
  EngineConfig small;
  small.kv_budget_bytes = 1;  // the minimum pool: one usable block
  auto engine = make_engine(small);
  EXPECT_EQ(engine->model_info().max_model_len, 16);
  std::optional<FinishReason> finish;
  auto s = engine->submit(greedy(prompt_of(10, 1), 20));
  drain(*s, &finish);
  EXPECT_EQ(finish, FinishReason::Error);
  auto bad = engine->submit(greedy({1, 2, 100000}, 2));
  drain(*bad, &finish);
  EXPECT_EQ(finish, FinishReason::Error);
}

// Teacher-forces row X token by token while other rows join and leave; its logits
// must equal the solo teacher-forced logits at every step.
TEST(Engine, RowLogitsDoNotDependOnTheOtherRows) {
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model("llama"), *backend);
  std::vector<int32_t> x = prompt_of(40, 5);
  Tensor solo = teacher_forced_logits(*model, *backend, x);
  int V = model->config().vocab_size, bs = 16;
  BlockPool pool(64);
  ModelRunner runner(*model, *backend, pool.num_blocks(), bs);
  // Llama has one KV group: each row has one block table.
  ASSERT_EQ(runner.num_groups(), 1);
  BlockTables x_blocks{pool.allocate(blocks_for(40, bs))};
  std::vector<int32_t> y = prompt_of(60, 9), z = prompt_of(33, 4);
  BlockTables y_blocks{pool.allocate(blocks_for(60, bs))};
  BlockTables z_blocks{pool.allocate(blocks_for(33, bs))};
  int y_done = 0, z_done = 0;
  double worst = 0;
  for (int p = 0; p < 40; p++) {
    std::vector<PlanRow> rows;
    if (p >= 10 && y_done < 60) {  // y joins at step 10 in chunks of 5, then leaves
      int n = std::min(5, 60 - y_done);
      rows.push_back({y, y_done, n, y_blocks, 1});
      y_done += n;
    }
    rows.push_back({x, p, 1, x_blocks, 1});
    if (p % 3 == 0 && z_done < 33) {  // z advances every third step
      int n = std::min(4, 33 - z_done);
      rows.push_back({z, z_done, n, z_blocks, 2});
      z_done += n;
    }
    Tensor logits = backend->to_host_f32(runner.forward(build_step_plan(rows, bs)));
    int x_row = p >= 10 && y_done <= 60 && rows[0].tokens.data() == y.data() ? 1 : 0;
    worst = std::max(worst, test::relative_error(logits.ptr<float>() + int64_t(x_row) * V,
                                                 solo.ptr<float>() + int64_t(p) * V, V));
  }
  EXPECT_LE(worst, 1e-5);
}

// A verify graph's layout (engine/verify_graphs.h): rows padded to Q tokens with copies
// of their last token that write no KV, padding rows after them. The padded plan's
// logits at the renumbered samples equal the plan's, and the K/V it leaves is the plan's:
// a following step reads the same cache either way.
TEST(Engine, PaddedUniformRowsComputeWhatThePlanComputes) {
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model("llama"), *backend);
  const int V = model->config().vocab_size, bs = 16;
  std::vector<std::vector<int32_t>> seqs{prompt_of(30, 3), prompt_of(19, 7), prompt_of(40, 11)};
  const std::vector<int> known{26, 18, 37};  // cached before the verify step
  std::vector<Tensor> logits;                // [run]: verify step, then the step after
  for (bool padded : {false, true}) {
    BlockPool pool(32);
    ModelRunner runner(*model, *backend, pool.num_blocks(), bs);
    std::vector<BlockTables> tables;
    std::vector<PlanRow> prefill, verify, after;
    for (size_t r = 0; r < seqs.size(); r++) tables.push_back({pool.allocate(blocks_for(41, bs))});
    for (size_t r = 0; r < seqs.size(); r++) {
      const int n = int(seqs[r].size()) - known[r] - (r == 1 ? 0 : 1);  // 3, 1, 2 tokens
      prefill.push_back({seqs[r], 0, known[r], tables[r], 1});
      verify.push_back({seqs[r], known[r], n, tables[r], n});
      after.push_back({seqs[r], known[r] + n, 1, tables[r], 1});
    }
    runner.forward(build_step_plan(prefill, bs));
    StepPlan plan = build_step_plan(verify, bs);
    ASSERT_EQ(plan.num_tokens(), 6);
    if (padded) {
      const StepPlan p = pad_uniform_rows(plan, 4, 4);
      EXPECT_EQ(p.seq_starts, (std::vector<int32_t>{0, 4, 8, 12, 16}));
      EXPECT_EQ(p.sample_index, (std::vector<int32_t>{0, 1, 2, 4, 8, 9}));
      EXPECT_EQ(p.positions[3], p.positions[2]) << "a copy of the row's last token";
      EXPECT_EQ(p.groups[0].slot_map[3], -1) << "copies write no KV";
      EXPECT_EQ(p.groups[0].slot_map[12], -1) << "padding rows write no KV";
      EXPECT_EQ(p.context_lens[3], 1);
      plan = p;
    }
    logits.push_back(backend->to_host_f32(runner.forward(plan)));
    // Each row's next token at the position after its chunk: over the cache the step left.
    std::vector<PlanRow> next;
    for (size_t r = 0; r < seqs.size(); r++)
      if (after[r].start < int(seqs[r].size()))
        next.push_back({seqs[r], after[r].start, 1, tables[r], 1});
    ASSERT_EQ(next.size(), 2u);
    logits.push_back(backend->to_host_f32(runner.forward(build_step_plan(next, bs))));
  }
  ASSERT_EQ(logits[0].numel(), logits[2].numel());
  EXPECT_LE(test::relative_error(logits[2].ptr<float>(), logits[0].ptr<float>(), logits[0].numel()),
            1e-5);
  EXPECT_LE(test::relative_error(logits[3].ptr<float>(), logits[1].ptr<float>(), 2 * int64_t(V)),
            1e-5);
}

}  // namespace engine_test
}  // namespace tandem
