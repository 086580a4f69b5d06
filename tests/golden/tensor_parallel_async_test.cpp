// The tensor-parallel executor is asynchronous (engine/tensor_parallel_executor.h): its
// steps run on the ranks' in-order queues (TpRanks::post) while the caller goes on. On CPU
// ranks at TP=1 (rank 0 feeds from its sampling op, as the single worker) and TP=2 (each rank
// from its copy of the ids broadcast by Communicator::broadcast_ids): a step fed from the
// previous step's sampled ids, issued before that step is collected, gives the oracle's
// greedy tokens, and chains of such steps draw the single worker's ids, greedy and seeded
// (at TP=1 with the broadcast forced, as on the GPU with NCCL); the engine
// overlapping its steps (forced on: the CPU's default is off) serves the batch gate's
// continuations, with prompt logprobs in the batch; a job that fails on the ranks surfaces
// from collect, once, and the group runs again after it; a draft model beside the ranks
// keeps the target's continuations. On a GPU with NCCL: one rank, overlapped, serves what the
// single-worker CUDA executor serves, with and without the broadcast forced; a speculating
// engine over one rank records its verify graphs at start-up and speculates as the single
// worker does.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>

#include "backend/cuda/nccl_communicator.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/tensor_parallel_executor.h"
#include "model/config.h"
#include "oracle_fixture.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {
namespace tensor_parallel_async_test {

// The folder `dir` as `size` ranks on `device` (at 1 too: a group of one, as
// TANDEM_TP_EXECUTOR loads it).
cli::LoadedModel load_ranks_at(const std::filesystem::path& dir, int size,
                               const std::string& device = "cpu") {
  cli::LoadedModel m = cli::load_model_folder(dir, device);
  m.model.reset();
  m.tp_ranks = TpRanks::load(dir, size, LoadOptions{.tp = {.size = size}}, *m.backend, m.model);
  return m;
}

cli::LoadedModel load_ranks(const std::string& arch, int size, const std::string& device = "cpu") {
  return load_ranks_at(oracle_dir(arch), size, device);
}

// One row of `tokens` at positions [start, start + tokens.size()), sampling its last token,
// its K/V in blocks 1, 2, … of every group (block 0 is the null block).
StepPlan one_row(std::vector<int32_t> tokens, int start, const KvLayout& layout) {
  const int bs = 16, n = int(tokens.size()), end = start + n;
  StepPlan plan;
  plan.block_size = bs;
  plan.tokens = std::move(tokens);
  for (int i = 0; i < n; i++) plan.positions.push_back(start + i);
  plan.seq_starts = {0, n};
  plan.context_lens = {end};
  plan.sample_index = {n - 1};
  const int blocks = (end + bs - 1) / bs;
  for (size_t g = 0; g < layout.num_blocks.size(); g++) {
    KvGroupPlan group;
    for (int b = 1; b <= blocks; b++) group.block_table.push_back(b);
    group.max_blocks = blocks;
    for (int p = start; p < end; p++) group.slot_map.push_back((1 + p / bs) * bs + p % bs);
    plan.groups.push_back(std::move(group));
  }
  return plan;
}

struct Ready {
  std::unique_ptr<Executor> executor;
  KvLayout layout;
};

Ready ready(std::unique_ptr<Executor> executor) {
  Ready out{.executor = std::move(executor)};
  out.layout = out.executor->allocate_kv(KvSizing{.max_rows = 1, .max_model_len = 128});
  out.executor->prepare(128, 1);
  return out;
}

Ready tp_executor(const std::string& arch, int size, const std::string& device = "cpu",
                  TpExecutorOptions options = {}) {
  cli::LoadedModel m = load_ranks(arch, size, device);
  return ready(make_tensor_parallel_executor(std::move(m.backend), std::move(m.model),
                                             std::move(m.tp_ranks), ExecutorConfig{}, nullptr,
                                             options));
}

Ready single_worker(const std::string& arch, const std::string& device = "cpu") {
  cli::LoadedModel m = cli::load_model_folder(oracle_dir(arch), device);
  return ready(make_executor(std::move(m.backend), std::move(m.model), ExecutorConfig{}));
}

// `steps` steps of one row: the prompt, then one token a step fed from the step before and
// issued before that step is collected (as the engine overlaps them), each drawn under `row`
// (its counter advanced a draw a step). The sampled ids.
std::vector<int32_t> fed_chain(Ready& e, const std::vector<int32_t>& prompt, SampleRow row,
                               int steps) {
  std::vector<int32_t> out;
  e.executor->issue(one_row(prompt, 0, e.layout), {&row, 1});
  for (int k = 1; k < steps; k++) {
    StepPlan fed = one_row({-1}, int(prompt.size()) + k - 1, e.layout);
    fed.feed_index = {0};
    fed.feed_source = {0};
    row.counter = uint64_t(k);
    e.executor->issue(fed, {&row, 1});
    out.push_back(e.executor->collect().at(0).token);
  }
  out.push_back(e.executor->collect().at(0).token);
  return out;
}

// The fed chains, greedy then seeded, of `tp` and of the single worker `one`: token for token.
void expect_fed_chains_equal(Ready& tp, Ready& one, const std::vector<int32_t>& prompt) {
  const SampleRow greedy{};
  const SampleRow seeded{.temperature = 1.5f, .seed = 1234};
  const std::vector<int32_t> want_greedy = fed_chain(one, prompt, greedy, 8);
  const std::vector<int32_t> want_seeded = fed_chain(one, prompt, seeded, 8);
  EXPECT_NE(want_seeded, want_greedy) << "the seeded draws never left the greedy path";
  EXPECT_EQ(fed_chain(tp, prompt, greedy, 8), want_greedy);
  EXPECT_EQ(fed_chain(tp, prompt, seeded, 8), want_seeded);
}

// Step 2 is fed step 1's sampled id (on the ranks, from their copy of the broadcast) and is
// issued before step 1 is collected, as the engine overlaps them.
class TensorParallelAsync : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallelAsync, AFedStepIssuedBeforeCollectGivesTheOracleTokens) {
  const OraclePrompt p = load_oracle("llama").front();
  Ready e = tp_executor("llama", GetParam());
  const int L = int(p.prompt.size());
  const SampleRow greedy{};
  e.executor->issue(one_row(p.prompt, 0, e.layout), {&greedy, 1});
  StepPlan fed = one_row({-1}, L, e.layout);
  fed.feed_index = {0};
  fed.feed_source = {0};
  e.executor->issue(fed, {&greedy, 1});
  const std::vector<SampledToken> first = e.executor->collect();
  const std::vector<SampledToken> second = e.executor->collect();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].token, p.greedy[0]);
  EXPECT_EQ(second[0].token, p.greedy[1]);
}

// A plan that fails a check on the ranks (it feeds from a step that never sampled): issue
// returns, collect throws naming it, and after reset the executor serves a good step.
TEST_P(TensorParallelAsync, ARankErrorSurfacesFromCollectAndTheGroupRunsOn) {
  const OraclePrompt p = load_oracle("llama").front();
  Ready e = tp_executor("llama", GetParam());
  const SampleRow greedy{};
  StepPlan bad = one_row(p.prompt, 0, e.layout);
  bad.feed_index = {0};
  bad.feed_source = {3};
  e.executor->issue(bad, {&greedy, 1});  // no throw: the ranks have not run it yet
  const std::string why = error_of([&] { e.executor->collect(); });
  EXPECT_NE(why.find("feeds"), std::string::npos) << why;
  e.executor->reset();
  e.executor->issue(one_row(p.prompt, 0, e.layout), {&greedy, 1});
  const std::vector<SampledToken> got = e.executor->collect();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].token, p.greedy[0]);
}

// TpRanks' queue: a job failing on rank 1 while rank 0 waits in a collective releases it;
// the jobs posted after it are skipped, the error is rethrown once (by the first wait), and
// the next job runs on every rank.
TEST(TensorParallelAsyncQueue, AFailedJobIsRethrownOnceAndTheQueueRunsOn) {
  cli::LoadedModel m = load_ranks("llama", 2);
  TpRanks& ranks = *m.tp_ranks;
  std::atomic<int> ran{0};
  ranks.post([&](int r) {
    if (r == 1) throw std::runtime_error("rank 1 fails");
    ranks.comm(r).barrier();
  });
  const uint64_t later = ranks.post([&](int) { ran++; });
  try {
    ranks.wait(later);
    FAIL() << "the failed job was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 fails");
  }
  EXPECT_EQ(ran.load(), 0) << "a job after the failed one ran";
  EXPECT_NO_THROW(ranks.drain());  // rethrown once only
  ranks.run([&](int r) {
    ranks.comm(r).barrier();
    ran++;
  });
  EXPECT_EQ(ran.load(), 2);
}

// The prompts through an engine overlapping its steps (issue n+1 before collecting n), all
// at once (batch 8, prompts chunked beside decoding rows), each for as many tokens as its
// batch_greedy holds; prompt 0 asks for its prompt logprobs too unless `spec` is given.
struct Served {
  std::vector<std::vector<int32_t>> tokens;  // [prompt][token]
  std::vector<GeneratedToken> scored;        // prompt 0's prompt logprobs
  SpecDecodeStats spec;
  int64_t graphs_at_start = 0;  // verify graphs the executor recorded before the first step
};

Served serve_overlapped(cli::LoadedModel& m, const std::vector<OraclePrompt>& prompts,
                        std::optional<SpeculativeConfig> spec = std::nullopt,
                        TpExecutorOptions options = {}) {
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = 16;
  config.kv_budget_bytes = int64_t(64) << 20;  // the same cache whatever the executor
  config.overlap = Overlap::On;  // made here: cli::make_engine would take TANDEM_OVERLAP's
  config.speculative = spec;
  const ExecutorConfig graphs{.graphs = true};
  std::unique_ptr<Executor> executor =
      m.tp_ranks ? make_tensor_parallel_executor(std::move(m.backend), std::move(m.model),
                                                 std::move(m.tp_ranks), graphs, std::move(m.draft),
                                                 options)
                 : make_executor(std::move(m.backend), std::move(m.model), graphs);
  const Executor& recorder = *executor;
  Engine engine(std::move(executor), m.tokenizer, config);
  const int64_t graphs_at_start = recorder.graphs_recorded();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); i++) {
    GenerationRequest req;
    req.prompt = prompts[i].prompt;
    req.max_tokens = int(prompts[i].batch_greedy.size());
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    if (i == 0 && !spec) req.prompt_logprobs = PromptLogprobs{.first = 1, .top = 0};
    streams.push_back(engine.submit(req));
  }
  engine.run_until_idle();
  Served out;
  out.graphs_at_start = graphs_at_start;
  out.tokens.resize(prompts.size());
  for (size_t i = 0; i < prompts.size(); i++)
    while (auto c = streams[i]->pop(std::chrono::milliseconds(0))) {
      for (auto& t : c->tokens) out.tokens[i].push_back(t.token);
      out.scored.insert(out.scored.end(), c->prompt_logprobs.begin(), c->prompt_logprobs.end());
    }
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
  out.spec = engine.stats().spec_decode;
  return out;
}

// On CPU ranks (overlap forced on: the CPU's default is off): the batch gate's
// continuations, and prompt logprobs that are log_softmax of the oracle's logits.
TEST_P(TensorParallelAsync, OverlappedBatchMatchesTheOracleWithPromptLogprobs) {
  cli::LoadedModel m = load_ranks("llama", GetParam());
  const std::vector<OraclePrompt> prompts = load_oracle("llama");
  const Served got = serve_overlapped(m, prompts);
  for (size_t i = 0; i < prompts.size(); i++)
    EXPECT_EQ(got.tokens[i], prompts[i].batch_greedy) << "prompt " << i;
  ASSERT_EQ(got.scored.size(), prompts[0].prompt.size() - 1);
  const int64_t V = prompts[0].logits.cols();
  for (size_t t = 0; t < got.scored.size(); t++) {
    const std::span<const float> row(prompts[0].logits.ptr<float>() + int64_t(t) * V, size_t(V));
    EXPECT_EQ(got.scored[t].token, prompts[0].prompt[t + 1]);
    EXPECT_NEAR(got.scored[t].logprob, token_logprob(row, prompts[0].prompt[t + 1], 0, nullptr),
                1e-3)
        << t;
  }
}

// On a GPU (skipped without one, or without NCCL): the NCCL executor at one rank, steps
// overlapped and graphs on, serves exactly what the single-worker CUDA executor serves —
// feeding from its sampling op, and with the broadcast forced (each decode graph's fed
// tokens then come from the NCCL-broadcast copy).
TEST(TensorParallelAsyncNccl, OneRankOverlappedEqualsTheSingleWorker) {
  if (cuda_device_count() < 1 || !nccl_available()) GTEST_SKIP() << "needs a GPU and NCCL";
  const std::vector<OraclePrompt> prompts = load_oracle("llama");
  cli::LoadedModel one = cli::load_model_folder(oracle_dir("llama"), "cuda");
  const Served want = serve_overlapped(one, prompts);
  for (const bool broadcast : {false, true}) {
    cli::LoadedModel tp = load_ranks("llama", 1, "cuda");
    const Served got =
        serve_overlapped(tp, prompts, std::nullopt, {.broadcast_at_one_rank = broadcast});
    ASSERT_EQ(got.tokens.size(), want.tokens.size());
    for (size_t i = 0; i < want.tokens.size(); i++) {
      EXPECT_EQ(want.tokens[i].size(), prompts[i].batch_greedy.size()) << "prompt " << i;
      EXPECT_EQ(got.tokens[i], want.tokens[i]) << "prompt " << i << ", broadcast " << broadcast;
    }
    ASSERT_EQ(got.scored.size(), want.scored.size());
    for (size_t t = 0; t < want.scored.size(); t++)
      EXPECT_NEAR(got.scored[t].logprob, want.scored[t].logprob, 1e-5) << t;
  }
}

// A draft model beside the ranks (--speculative-config), overlap on: exactly the target's
// own continuations, proposals accepted on the way (the draft waits for the ranks' queue; a
// step verifying proposals is read before the next is planned).
TEST_P(TensorParallelAsync, ADraftModelWithOverlapKeepsGreedy) {
  const std::filesystem::path models =
      std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." / "models";
  auto run = [&](bool speculate) {
    cli::LoadedModel m = load_ranks_at(models / "tiny-kjv", GetParam());
    std::vector<OraclePrompt> prompts(4);
    const char* texts[] = {"In the beginning God created", "And the LORD said unto",
                           "Blessed are the", "For God so loved"};
    for (size_t i = 0; i < prompts.size(); i++) {
      prompts[i].prompt = m.tokenizer->encode(texts[i], true);
      prompts[i].batch_greedy.resize(16);
    }
    if (!speculate) return serve_overlapped(m, prompts);
    SpeculativeConfig spec{.method = SpecMethod::DraftModel, .num_speculative_tokens = 4};
    spec.model = (models / "tiny-kjv-draft").string();
    spec.adaptive = false;  // every row proposes whenever it can
    cli::load_draft_model(m, spec);
    return serve_overlapped(m, prompts, spec);
  };
  const Served plain = run(false), drafted = run(true);
  for (size_t i = 0; i < plain.tokens.size(); i++) {
    EXPECT_EQ(plain.tokens[i].size(), 16u);
    EXPECT_EQ(drafted.tokens[i], plain.tokens[i]) << "prompt " << i;
  }
  EXPECT_GT(drafted.spec.num_accepted_tokens, 0) << "the draft's proposals were never accepted";
}

// The sampled ids reach the ranks through the communicator's broadcast_ids, device copy to
// device copy, and every rank feeds its next step from its own copy (at one rank the test
// hook forces that path; at two it is the only one): seven fed steps, each issued before
// the previous is collected, draw exactly the single worker's ids, greedy and seeded.
TEST_P(TensorParallelAsync, FedStepsFromTheBroadcastIdsEqualTheSingleWorker) {
  const OraclePrompt p = load_oracle("llama").front();
  Ready one = single_worker("llama");
  Ready tp = tp_executor("llama", GetParam(), "cpu", {.broadcast_at_one_rank = true});
  expect_fed_chains_equal(tp, one, p.prompt);
}

// On a GPU with NCCL, one rank with the broadcast forced: the NCCL broadcast of the picked
// ids runs, and the fed chains equal the single-worker CUDA executor's.
TEST(TensorParallelAsyncNccl, OneRankBroadcastFedStepsEqualTheSingleWorker) {
  if (cuda_device_count() < 1 || !nccl_available()) GTEST_SKIP() << "needs a GPU and NCCL";
  const OraclePrompt p = load_oracle("llama").front();
  Ready one = single_worker("llama", "cuda");
  Ready tp = tp_executor("llama", 1, "cuda", {.broadcast_at_one_rank = true});
  expect_fed_chains_equal(tp, one, p.prompt);
}

// On a GPU with NCCL: a speculating engine (n-gram proposals) over one rank records its
// verify graphs at start-up, as the single worker does (each rank its own, the collectives
// inside), and serves the single worker's ids with the same proposals accepted.
TEST(TensorParallelAsyncNccl, OneRankRecordsVerifyGraphsAndSpeculatesAsTheSingleWorker) {
  if (cuda_device_count() < 1 || !nccl_available()) GTEST_SKIP() << "needs a GPU and NCCL";
  const std::filesystem::path dir =
      std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." / "models" / "tiny-kjv";
  SpeculativeConfig spec{.method = SpecMethod::Ngram, .num_speculative_tokens = 4};
  spec.prompt_lookup_min = 1;
  spec.prompt_lookup_max = 3;
  spec.adaptive = false;  // every row verifies whatever it has, every step
  auto run = [&](bool tp) {
    cli::LoadedModel m = tp ? load_ranks_at(dir, 1, "cuda") : cli::load_model_folder(dir, "cuda");
    std::vector<OraclePrompt> prompts(2);
    const char* texts[] = {"And God said, Let there be light: and there was light. And God",
                           "And the LORD spake unto Moses, saying, Speak unto the children of"};
    for (size_t i = 0; i < prompts.size(); i++) {
      prompts[i].prompt = m.tokenizer->encode(texts[i], true);
      prompts[i].batch_greedy.resize(32);
    }
    return serve_overlapped(m, prompts, spec);
  };
  const Served one = run(false), tp = run(true);
  EXPECT_GT(one.graphs_at_start, 0) << "the single worker recorded no verify graphs";
  EXPECT_EQ(tp.graphs_at_start, one.graphs_at_start);
  EXPECT_EQ(tp.tokens, one.tokens);
  EXPECT_GT(one.spec.num_accepted_tokens, 0) << "no proposal was ever accepted";
  EXPECT_EQ(tp.spec.num_draft_tokens, one.spec.num_draft_tokens);
  EXPECT_EQ(tp.spec.num_accepted_tokens, one.spec.num_accepted_tokens);
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallelAsync, ::testing::Values(1, 2),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

}  // namespace tensor_parallel_async_test
}  // namespace tandem::test
