// The engine on a real (tiny, oracle) model: preemption keeps outputs identical,
// cancellation frees blocks, impossible requests are refused, and a row's logits do not
// depend on which other rows share its steps (gate 2 of docs/DESIGN.md §6).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/teacher_forcing.h"
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

}  // namespace engine_test
}  // namespace tandem
