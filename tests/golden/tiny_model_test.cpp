// The embedded default model (models/tiny-kjv): tandem tokenizes the reference prompt
// and decodes it greedily exactly as transformers did when the model was trained
// (train_log.json → greedy_reference, recorded on the GPU machine). On a GPU (skipped
// without one): speculative verify steps replayed through CUDA graphs
// (engine/verify_graphs.h) give what the same steps give eagerly, with its draft
// (models/tiny-kjv-draft) and with n-gram proposals.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "kv/block_pool.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {
namespace tiny_model_test {

std::filesystem::path model_dir(const char* name) {
  return std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." / "models" / name;
}

TEST(TinyModel, GreedyMatchesTransformers) {
  std::filesystem::path dir = model_dir("tiny-kjv");
  auto log = nlohmann::json::parse(std::ifstream(dir / "train_log.json"));
  auto ref = log.at("greedy_reference");
  auto tokenizer = Tokenizer::load(dir / "tokenizer.json");
  std::vector<int32_t> prompt = tokenizer->encode(ref.at("prompt").get<std::string>(), true);
  EXPECT_EQ(prompt, ref.at("prompt_ids").get<std::vector<int32_t>>());
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend);
  Engine engine(make_executor(std::move(backend), std::move(model)), tokenizer, EngineConfig{});
  GenerationRequest req;
  req.prompt = prompt;
  auto expected = ref.at("new_ids").get<std::vector<int32_t>>();
  req.max_tokens = int(expected.size());
  req.sampling.temperature = 0;
  req.ignore_eos = true;
  auto stream = engine.submit(req);
  engine.run_until_idle();
  std::vector<int32_t> got;
  std::string text;
  while (auto c = stream->pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) got.push_back(t.token);
    text += c->text;
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(text, ref.at("text").get<std::string>());
}

// One verify step's rows on the GPU, through ModelRunners with and without graphs: the
// graph's (rows padded to 5 tokens, 4 rows) logits have the eager step's argmax at every
// position the eager logits decide (top-2 gap >= 0.1), and the K/V both leave gives the
// same next step. Twice, so the second replay reads rewritten inputs.
TEST(TinyModelCuda, VerifyStepThroughAGraphGivesTheEagerLogits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  auto backend = make_cuda_backend(0);
  auto model = load_model(model_dir("tiny-kjv"), *backend);
  const int64_t V = model->config().vocab_size;
  const int bs = 16;
  auto tokenizer = Tokenizer::load(model_dir("tiny-kjv") / "tokenizer.json");
  std::vector<std::vector<int32_t>> seqs;
  for (const char* text :
       {"In the beginning God created the heaven and the earth. And the earth was without "
        "form, and void; and darkness was upon the face of the deep.",
        "And it came to pass, when men began to multiply on the face of the earth, and "
        "daughters were born unto them, that the sons of God saw the daughters of men",
        "The LORD is my shepherd; I shall not want. He maketh me to lie down in green "
        "pastures: he leadeth me beside the still waters. He restoreth my soul"}) {
    seqs.push_back(tokenizer->encode(text, true));
    ASSERT_GE(seqs.back().size(), 17u) << "the steps below need 17 tokens";
  }
  std::vector<std::vector<float>> runs[2];  // [graphs] host logits of each step
  int64_t replays = 0;
  for (int graphs : {0, 1}) {
    BlockPool pool(64);
    ModelRunner runner(*model, *backend, pool.num_blocks(), bs);
    if (graphs) {
      runner.enable_graphs(256, 8, /*verify=*/true);
      EXPECT_EQ(runner.graphs_recorded(), 4) << "decode buckets 1, 2, 4 and 8, up front";
    }
    std::vector<BlockTables> tables;
    for (size_t r = 0; r < seqs.size(); r++) tables.push_back({pool.allocate(blocks_for(256, bs))});
    std::vector<PlanRow> prefill;
    for (size_t r = 0; r < seqs.size(); r++) prefill.push_back({seqs[r], 0, 6, tables[r], 1});
    runner.forward(build_step_plan(prefill, bs));
    int at = 6;
    for (int n : {5, 3}) {  // verify chunks: rows of n, 1 and n - 1 tokens
      std::vector<PlanRow> rows;
      const int counts[3] = {n, 1, n - 1};
      for (size_t r = 0; r < seqs.size(); r++)
        rows.push_back({seqs[r], at, counts[r], tables[r], counts[r]});
      Tensor logits = backend->to_host_f32(runner.forward(build_step_plan(rows, bs)));
      runs[graphs].emplace_back(logits.ptr<float>(), logits.ptr<float>() + logits.numel());
      at += n;  // the next step: every row up to position `at` (rows 1 and 2 catch up)
      for (size_t r = 0; r < seqs.size(); r++)
        rows[r] = {seqs[r], at - n + counts[r], n - counts[r] + 1, tables[r], 1};
      Tensor next = backend->to_host_f32(runner.forward(build_step_plan(rows, bs)));
      runs[graphs].emplace_back(next.ptr<float>(), next.ptr<float>() + next.numel());
      at += 1;  // every row has computed positions < at now
    }
    if (graphs) {
      replays = runner.verify_graph_replays();
      // The decode graphs were recorded in enable_graphs: a decode step records none.
      const int64_t recorded = runner.graphs_recorded();
      std::vector<PlanRow> decode;
      for (size_t r = 0; r < seqs.size(); r++) decode.push_back({seqs[r], at, 1, tables[r], 1});
      runner.forward(build_step_plan(decode, bs));
      EXPECT_EQ(runner.graphs_recorded(), recorded) << "a decode step recorded its graph";
    }
  }
  EXPECT_GE(replays, 2) << "the verify steps did not take a graph";
  ASSERT_EQ(runs[0].size(), runs[1].size());
  int decided = 0;
  for (size_t step = 0; step < runs[0].size(); step++) {
    ASSERT_EQ(runs[0][step].size(), runs[1][step].size());
    for (size_t row = 0; row * size_t(V) < runs[0][step].size(); row++) {
      const float* eager = runs[0][step].data() + row * size_t(V);
      const float* graph = runs[1][step].data() + row * size_t(V);
      std::vector<float> sorted(eager, eager + V);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] < 0.1f) continue;
      decided++;
      EXPECT_EQ(std::max_element(graph, graph + V) - graph,
                std::max_element(eager, eager + V) - eager)
          << "step " << step << ", logits row " << row;
    }
  }
  EXPECT_GE(decided, 10);
}

// Greedy requests at batch 4 with speculation (n-gram; the draft model), on the GPU with
// CUDA graphs (decode, verify and the draft's steps) and without: token for token the same,
// and the rows did speculate.
TEST(TinyModelCuda, SpeculativeGreedyWithGraphsEqualsEager) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  auto tokenizer = Tokenizer::load(model_dir("tiny-kjv") / "tokenizer.json");
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"In the beginning God created the heaven and the earth.",
                           "And God said, Let there be light: and there was light. And God",
                           "Blessed are the poor in spirit: for theirs is the kingdom",
                           "And the LORD spake unto Moses, saying, Speak unto the children of"})
    prompts.push_back(tokenizer->encode(text, true));
  for (bool draft : {false, true}) {
    SpeculativeConfig spec;
    spec.num_speculative_tokens = 4;
    spec.adaptive = false;  // every row verifies whatever it has, every step
    if (draft) {
      spec.method = SpecMethod::DraftModel;
      spec.model = model_dir("tiny-kjv-draft").string();
    } else {
      spec.prompt_lookup_min = 1;
      spec.prompt_lookup_max = 3;
    }
    std::vector<std::vector<int32_t>> out[2];
    for (int graphs : {0, 1}) {
      auto backend = make_cuda_backend(0);
      auto model = load_model(model_dir("tiny-kjv"), *backend);
      auto draft_model = draft ? load_model(model_dir("tiny-kjv-draft"), *backend) : nullptr;
      EngineConfig config;
      config.scheduler.max_rows = 4;
      config.speculative = spec;
      std::unique_ptr<Executor> executor =
          make_executor(std::move(backend), std::move(model),
                        ExecutorConfig{.graphs = graphs == 1, .verify_graphs = graphs == 1},
                        std::move(draft_model));
      const Executor* ex = executor.get();
      Engine engine(std::move(executor), tokenizer, config);
      // A speculating engine records its one-row verify graphs at start-up.
      if (graphs == 1) {
        EXPECT_GT(ex->graphs_recorded(), 0) << "no verify graphs were recorded";
      }
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (const auto& p : prompts) {
        GenerationRequest req;
        req.prompt = p;
        req.max_tokens = 80;
        req.sampling.temperature = 0;
        req.ignore_eos = true;
        streams.push_back(engine.submit(req));
      }
      engine.run_until_idle();
      for (auto& s : streams) {
        out[graphs].emplace_back();
        while (auto c = s->pop(std::chrono::milliseconds(0))) {
          EXPECT_TRUE(c->error.empty()) << c->error;
          for (auto& t : c->tokens) out[graphs].back().push_back(t.token);
        }
        EXPECT_EQ(out[graphs].back().size(), 80u);
      }
      const SpecDecodeStats st = engine.stats().spec_decode;
      EXPECT_GT(st.num_accepted_tokens, 0) << (draft ? "draft" : "ngram") << ", graphs " << graphs;
      std::printf("[ tiny-kjv  ] %s, graphs %d: %lld drafts, %lld of %lld proposals accepted\n",
                  draft ? "draft" : "ngram", graphs, (long long)st.num_drafts,
                  (long long)st.num_accepted_tokens, (long long)st.num_draft_tokens);
    }
    for (size_t i = 0; i < prompts.size(); i++)
      EXPECT_EQ(out[1][i], out[0][i]) << (draft ? "draft" : "ngram") << ", prompt " << i;
  }
}

}  // namespace tiny_model_test
}  // namespace tandem::test
