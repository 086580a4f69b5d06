// Tensor parallelism on CPU ranks (docs/tensor-parallel.md, issue 47): the in-memory
// communicator sums in rank order whatever the thread timing; N ranks, each holding its
// slices, reproduce the oracle's teacher-forced logits within 1e-4 (dense, GQA with KV heads
// split or replicated, MoE, sliding window), and through the tensor-parallel executor the
// batch gate's continuations, with the prefix cache serving repeats; LoRA adapters cut like
// their base weights match PEFT; a dimension N does not divide, and what is not split yet,
// are clear errors. GPU ranks through NCCL (skipped without a GPU or NCCL): one rank equals
// the single-worker CUDA executor (graphs on: the all-reduces captured), two match it
// within bf16's noise.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "backend/cpu/cpu_communicator.h"
#include "backend/cuda/nccl_communicator.h"
#include "cli/command_flags.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/teacher_forcing.h"
#include "engine/tensor_parallel_executor.h"
#include "loader/safetensors.h"
#include "lora_fixture.h"
#include "model/config.h"
#include "model/lora/lora_slots.h"
#include "oracle_fixture.h"
#include "tokenizer/tokenizer.h"
#include "vision_fixture.h"

namespace tandem::test {
namespace tensor_parallel_test {

// Runs fn(rank) on `n` threads at once, rank r starting r·`stagger_ms` late.
void on_threads(int n, int stagger_ms, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(r * stagger_ms));
      fn(r);
    });
  for (auto& t : threads) t.join();
}

TEST(TpCommunicator, SumsInRankOrderWhateverTheTiming) {
  // f32 addition is not associative here: (1e8 + 1) − 1e8 + 1 = 1 in rank order, 2 or 0 in others.
  const float values[4][2] = {{1e8f, 3.f}, {1.f, 0.25f}, {-1e8f, -3.f}, {1.f, 0.5f}};
  float expect[2];
  for (int i = 0; i < 2; i++)
    expect[i] = ((values[0][i] + values[1][i]) + values[2][i]) + values[3][i];
  for (int stagger : {0, 3, -1}) {
    CpuCommHub hub(4);
    std::vector<std::vector<float>> got(4);
    on_threads(4, stagger < 0 ? 0 : stagger, [&](int r) {
      if (stagger < 0) std::this_thread::sleep_for(std::chrono::milliseconds((3 - r) * 3));
      got[size_t(r)] = {values[r][0], values[r][1]};
      Tensor x = Tensor::borrow(got[size_t(r)].data(), DType::F32, {2});
      hub.rank(r).all_reduce_sum(x);
    });
    for (int r = 0; r < 4; r++) {
      EXPECT_EQ(got[size_t(r)][0], expect[0]) << "rank " << r << ", stagger " << stagger;
      EXPECT_EQ(got[size_t(r)][1], expect[1]) << "rank " << r << ", stagger " << stagger;
    }
  }
}

TEST(TpCommunicator, GathersColumnsAndBroadcastsIds) {
  CpuCommHub hub(2);
  std::vector<std::vector<float>> out(2, std::vector<float>(8));
  std::vector<std::vector<int32_t>> ids(2, std::vector<int32_t>(3, -1)), tensor_ids = ids;
  on_threads(2, 1, [&](int r) {
    std::vector<float> local = {float(10 * r), float(10 * r + 1), float(10 * r + 2),
                                float(10 * r + 3)};
    Tensor piece = Tensor::borrow(local.data(), DType::F32, {2, 2});
    Tensor all = Tensor::borrow(out[size_t(r)].data(), DType::F32, {2, 4});
    hub.rank(r).all_gather_columns(all, piece);
    if (r == 0) ids[0] = {7, 8, 9};
    hub.rank(r).broadcast(ids[size_t(r)], 0);
    if (r == 1) tensor_ids[1] = {4, 5, 6};  // broadcast_ids of an [S] i32 tensor, from root 1
    Tensor t = Tensor::borrow(tensor_ids[size_t(r)].data(), DType::I32, {3});
    hub.rank(r).broadcast_ids(t, 1);
  });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(out[size_t(r)], (std::vector<float>{0, 1, 10, 11, 2, 3, 12, 13})) << "rank " << r;
    EXPECT_EQ(ids[size_t(r)], (std::vector<int32_t>{7, 8, 9})) << "rank " << r;
    EXPECT_EQ(tensor_ids[size_t(r)], (std::vector<int32_t>{4, 5, 6})) << "rank " << r;
  }
}

TEST(TpCommunicator, AFailedRankReleasesTheOthers) {
  CpuCommHub hub(3);
  std::vector<int> threw(3, 0);
  on_threads(3, 2, [&](int r) {
    try {
      if (r == 1) {
        hub.rank(r).abort();  // rank 1 failed before the collective
        return;
      }
      hub.rank(r).barrier();
    } catch (const Error&) {
      threw[size_t(r)] = 1;
    }
  });
  EXPECT_EQ(threw, (std::vector<int>{1, 0, 1}));
  hub.rank(0).reset();
  on_threads(3, 0, [&](int r) { hub.rank(r).barrier(); });  // usable again
}

TEST(TensorParallelFlag, TpAliasAndLongFormParse) {
  for (std::vector<const char*> argv : {std::vector<const char*>{"tandem", "-tp", "4"},
                                        {"tandem", "-tp=4"},
                                        {"tandem", "--tensor-parallel-size", "4"}}) {
    CLI::App app;
    cli::GenerateOptions o;
    cli::add_model_flags(app, o, {"model"});
    app.parse(cli::cli_args(int(argv.size()), argv.data()));
    EXPECT_EQ(o.tensor_parallel_size, 4) << argv[1];
  }
  // Out of range or not a number: refused at parse time, before any rank or thread exists.
  for (const char* bad : {"0", "-1", "65", "1000000000", "two", ""}) {
    CLI::App app;
    cli::GenerateOptions o;
    cli::add_model_flags(app, o, {"model"});
    std::vector<const char*> argv = {"tandem", "-tp", bad};
    EXPECT_THROW(app.parse(cli::cli_args(int(argv.size()), argv.data())), CLI::ParseError) << bad;
  }
}

cli::LoadedModel load_ranks_at(const std::filesystem::path& dir, int size) {
  return cli::load_model_folder(dir, "cpu", LoadOptions{.tp = {.size = size}});
}

cli::LoadedModel load_ranks(const std::string& arch, int size, LoraCapacity lora = {}) {
  return cli::load_model_folder(oracle_dir(arch), "cpu",
                                LoadOptions{.lora = lora, .tp = {.size = size}});
}

struct TpCase {
  std::string arch;
  int size;
};

class TensorParallelParity : public ::testing::TestWithParam<TpCase> {};

TEST_P(TensorParallelParity, TeacherForcedLogitsMatchTheOracle) {
  cli::LoadedModel m = load_ranks(GetParam().arch, GetParam().size);
  ASSERT_TRUE(m.tp_ranks);
  for (auto& p : load_oracle(GetParam().arch)) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    for (int chunk : {0, 7}) {
      Tensor ours = teacher_forced_logits(*m.tp_ranks, ids, chunk);
      ASSERT_EQ(ours.numel(), p.logits.numel());
      EXPECT_LE(relative_error(ours.ptr<float>(), p.logits.ptr<float>(), size_t(ours.numel())),
                1e-4)
          << "prompt of " << p.prompt.size() << " tokens, chunk " << chunk;
    }
  }
}

TEST_P(TensorParallelParity, EachRankHoldsItsSlicesOnly) {
  cli::LoadedModel whole = cli::load_model_folder(oracle_dir(GetParam().arch), "cpu");
  cli::LoadedModel m = load_ranks(GetParam().arch, GetParam().size);
  const int64_t all = whole.model->num_parameters();
  const ModelConfig& c = whole.model->config();
  const int N = GetParam().size;
  // The k and v rows (and biases) of KV heads replicated where a layer has fewer than N
  // (per layer: Gemma 4's full layers have their own head_dim and KV heads), each held by
  // N / Hkv ranks: at most this many parameters more than the model's.
  const std::vector<LayerKvSpec> kv_whole = whole.model->kv_specs(),
                                 kv_rank = m.tp_ranks->model(1).kv_specs();
  int64_t replicated = 0;
  for (size_t i = 0; i < kv_whole.size(); i++) {
    if (kv_whole[i].shares_with) continue;  // reads another layer's KV: no k or v of its own
    const int64_t extra_heads = int64_t(N) * kv_rank[i].num_kv_heads - kv_whole[i].num_kv_heads;
    replicated += extra_heads * 2 * kv_whole[i].head_dim * (c.hidden_size + 1);
    // Each rank's KV cache holds its share of the KV heads (replicated when N > Hkv).
    const int kv = kv_whole[i].num_kv_heads >= N ? kv_whole[i].num_kv_heads / N : 1;
    EXPECT_EQ(kv_rank[i].num_kv_heads, kv) << "layer " << i;
  }
  // Held whole on every rank (counted on rank 0): norms and routers; Gemma 3n's AltUp,
  // LAuReL and per-layer branch too, 14% of this 316k-parameter fixture (about 1% of E4B).
  const int64_t whole_share = GetParam().arch == "gemma3n" ? all / 6 : all / 20;
  int64_t sum = 0;
  for (int r = 0; r < m.tp_ranks->size(); r++) {
    const int64_t mine = m.tp_ranks->model(r).num_parameters();
    // Its 1/N of every split weight, and (rank 0) the weights held whole.
    EXPECT_LT(mine, all / N + whole_share + replicated / N) << "rank " << r;
    sum += mine;
  }
  // The slices tile the model: nothing twice, nothing left out — but for replicated KV rows.
  if (replicated == 0) {
    EXPECT_EQ(sum, all);
  } else {
    EXPECT_GT(sum, all);
    EXPECT_LE(sum - all, replicated);
  }
}

std::vector<TpCase> parity_cases() {
  std::vector<TpCase> out;
  // Dense, GQA (KV heads split at N = 2, replicated at N = 4), MoE, sliding window, fused
  // q|k|v and gate|up sources (phi3), tied embeddings with softcaps (gemma2/3); Gemma 4
  // with per-layer inputs, KV sharing with k_eq_v and a double-wide MLP, and its MoE block;
  // Gemma 3n (AltUp, LAuReL, KV sharing, activation sparsity on its first two layers).
  for (const char* arch :
       {"llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3", "qwen3_moe", "mixtral",
        "gemma4", "gemma4_kvshare", "gemma4_moe", "gemma4_moe_nople", "gemma3n"})
    for (int size : {2, 4}) out.push_back({arch, size});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Architectures, TensorParallelParity, ::testing::ValuesIn(parity_cases()),
                         [](const auto& info) {
                           return info.param.arch + "_tp" + std::to_string(info.param.size);
                         });

// Greedy continuations through the tensor-parallel executor: `prompts` submitted at once
// (batched) or one after another; and the prompt tokens the prefix cache served.
struct Served {
  std::vector<std::vector<int32_t>> tokens;
  int cached_tokens = 0;
};

Served serve_greedy(Engine& engine, const std::vector<OraclePrompt>& prompts, bool batched) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  Served out;
  out.tokens.resize(prompts.size());
  for (size_t i = 0; i < prompts.size(); i++) {
    GenerationRequest req;
    req.prompt = prompts[i].prompt;
    req.max_tokens = int(prompts[i].greedy.size());
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    streams.push_back(engine.submit(req));
    if (!batched) engine.run_until_idle();
  }
  engine.run_until_idle();
  for (size_t i = 0; i < prompts.size(); i++)
    while (auto c = streams[i]->pop(std::chrono::milliseconds(0))) {
      for (auto& t : c->tokens) out.tokens[i].push_back(t.token);
      out.cached_tokens += c->cached_tokens;
    }
  return out;
}

class TensorParallelBatchGate : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelBatchGate, AllPromptsAtOnceMatchTheOracleAtTp2) {
  cli::LoadedModel m = load_ranks(GetParam(), 2);
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = 16;  // prompts chunked beside decoding rows
  config.enable_prefix_caching = true;
  std::unique_ptr<Engine> engine = cli::make_engine(m, config, std::nullopt);
  const std::vector<OraclePrompt> prompts = load_oracle(GetParam());
  const Served together = serve_greedy(*engine, prompts, /*batched=*/true);
  for (size_t i = 0; i < prompts.size(); i++)
    EXPECT_EQ(together.tokens[i], prompts[i].batch_greedy) << "prompt " << i << " at batch 8";
  // Alone, one after another: the prompts' full blocks come from the prefix cache now.
  const Served alone = serve_greedy(*engine, prompts, /*batched=*/false);
  for (size_t i = 0; i < prompts.size(); i++)
    EXPECT_EQ(alone.tokens[i], prompts[i].greedy) << "prompt " << i << " alone";
  EXPECT_GT(alone.cached_tokens, 0) << "the prefix cache served nothing";
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, TensorParallelBatchGate,
                         ::testing::Values("llama", "qwen3", "gemma2", "mistral", "qwen3_moe",
                                           "mixtral", "gemma4_kvshare", "gemma4_moe", "gemma3n"),
                         [](const auto& info) { return info.param; });

// Prompt logprobs ride in the same forward (rank 0 scores them): each is log_softmax of the
// oracle's logits at the position before it.
TEST(TensorParallelExecutor, PromptLogprobsMatchTheOracle) {
  cli::LoadedModel m = load_ranks("qwen3", 2);
  std::unique_ptr<Engine> engine = cli::make_engine(m, EngineConfig{}, std::nullopt);
  const OraclePrompt p = load_oracle("qwen3").front();
  GenerationRequest req;
  req.prompt = p.prompt;
  req.max_tokens = 1;
  req.sampling.temperature = 0;
  req.prompt_logprobs = PromptLogprobs{.first = 1, .top = 0};
  auto stream = engine->submit(req);
  engine->run_until_idle();
  std::vector<GeneratedToken> got;
  while (auto c = stream->pop(std::chrono::milliseconds(0)))
    got.insert(got.end(), c->prompt_logprobs.begin(), c->prompt_logprobs.end());
  ASSERT_EQ(got.size(), p.prompt.size() - 1);
  const int64_t V = p.logits.cols();
  for (size_t i = 0; i < got.size(); i++) {
    const std::span<const float> row(p.logits.ptr<float>() + int64_t(i) * V, size_t(V));
    EXPECT_EQ(got[i].token, p.prompt[i + 1]);
    EXPECT_NEAR(got[i].logprob, token_logprob(row, p.prompt[i + 1], 0, nullptr), 1e-3) << i;
  }
}

TEST(TensorParallelErrors, ADimensionNDoesNotDivideIsNamed) {
  const std::string e = error_of([] { load_ranks("llama", 3); });
  EXPECT_NE(e.find("num_attention_heads = 4 is not divisible by --tensor-parallel-size 3"),
            std::string::npos)
      << e;
}

// Multimodal Gemma 3 (SigLIP) and Gemma 4 folders at N = 2: the text model split, each rank
// encoding the images with its own whole vision tower. Teacher-forced logits within 1e-4 of
// the vision oracle (which -tp 1 matches: vision_oracle_test.cpp), and greedy through the
// tensor-parallel executor equal to its tokens.
class TensorParallelVision : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelVision, ImagePromptsMatchTheOracleAtTp2) {
  cli::LoadedModel m = load_ranks_at(vision_oracle_dir(GetParam()), 2);
  ASSERT_TRUE(m.tp_ranks);
  const std::vector<VisionCase> cases =
      load_vision_oracle(GetParam(), m.tp_ranks->model(0).vision_spec().image_token_id);
  ASSERT_GE(cases.size(), 2u);
  for (const VisionCase& c : cases) {
    std::vector<int32_t> ids = c.prompt;
    ids.insert(ids.end(), c.greedy.begin(), c.greedy.end());
    Tensor ours = teacher_forced_logits(*m.tp_ranks, ids, 7, 16, 0, c.media);
    ASSERT_EQ(ours.numel(), c.logits.numel());
    EXPECT_LE(relative_error(ours.ptr<float>(), c.logits.ptr<float>(), size_t(ours.numel())), 1e-4)
        << c.media.size() << " images, " << c.prompt.size() << " tokens";
  }
  std::unique_ptr<Engine> engine = cli::make_engine(m, EngineConfig{}, std::nullopt);
  for (size_t i = 0; i < 2; i++) {
    auto stream = engine->submit(vision_request(cases[i], int(cases[i].greedy.size())));
    engine->run_until_idle();
    std::vector<int32_t> got;
    while (auto chunk = stream->pop(std::chrono::milliseconds(0)))
      for (auto& t : chunk->tokens) got.push_back(t.token);
    EXPECT_EQ(got, cases[i].greedy) << "case " << i;
  }
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(Folders, TensorParallelVision,
                         ::testing::Values("gemma3_vision", "gemma4_vision_bidir",
                                           "gemma4_vision_causal"),
                         [](const auto& info) { return info.param; });

// LoRA adapters cut like their base weights: B's rows with q|k|v and gate|up, A's columns
// with o and down. Each adapter in its own slot on every rank; PEFT's logits within 1e-4.
class TensorParallelLora : public ::testing::TestWithParam<TpCase> {};

TEST_P(TensorParallelLora, TeacherForcedLogitsMatchPeft) {
  const std::string arch = GetParam().arch;
  const std::vector<std::string> names = adapter_names(arch);
  ASSERT_FALSE(names.empty());
  cli::LoadedModel m =
      load_ranks(arch, GetParam().size, {.max_loras = int(names.size()), .max_rank = 8});
  for (size_t a = 0; a < names.size(); a++) {
    const PeftAdapter adapter = load_peft_adapter(lora_root() / arch / ("lora_" + names[a]));
    for (int r = 0; r < m.tp_ranks->size(); r++)
      write_lora_slot(m.tp_ranks->backend(r), m.tp_ranks->model(r).lora_targets(), int(a) + 1,
                      adapter);
  }
  auto golden = SafetensorsFile::open(lora_root() / arch / "lora_golden.safetensors");
  const auto prompts = load_oracle(arch);
  for (size_t a = 0; a < names.size(); a++)
    for (size_t i = 0; i < prompts.size(); i++) {
      const std::string key = names[a] + "." + std::to_string(i);
      std::vector<int32_t> ids = prompts[i].prompt,
                           greedy = ids_of(golden->tensor("greedy_" + key));
      ids.insert(ids.end(), greedy.begin(), greedy.end());
      Tensor want = golden->tensor("logits_" + key);
      Tensor ours = teacher_forced_logits(*m.tp_ranks, ids, 0, 16, int(a) + 1);
      ASSERT_EQ(ours.numel(), want.numel()) << key;
      EXPECT_LE(relative_error(ours.ptr<float>(), want.ptr<float>(), size_t(want.numel())), 1e-4)
          << "adapter " << key;
    }
}

// Through the tensor-parallel executor (Executor::lora_image / install_lora per rank): every
// prompt with the base model and with each adapter, all at once.
TEST_P(TensorParallelLora, MixedBatchGreedyMatchesPeft) {
  const std::string arch = GetParam().arch;
  const std::vector<std::string> names = adapter_names(arch);
  cli::LoadedModel m =
      load_ranks(arch, GetParam().size, {.max_loras = int(names.size()), .max_rank = 8});
  EngineConfig config;
  config.scheduler.max_rows = 16;
  std::unique_ptr<Engine> engine = cli::make_engine(m, config, std::nullopt);
  for (auto& n : names) engine->load_lora(n, lora_root() / arch / ("lora_" + n));
  auto golden = SafetensorsFile::open(lora_root() / arch / "lora_golden.safetensors");
  const auto prompts = load_oracle(arch);
  std::vector<std::pair<std::shared_ptr<RequestStream>, std::vector<int32_t>>> jobs;
  for (size_t i = 0; i < prompts.size(); i++)
    for (size_t a = 0; a <= names.size(); a++) {
      GenerationRequest req;
      req.prompt = prompts[i].prompt;
      req.max_tokens = int(prompts[i].greedy.size());
      req.sampling.temperature = 0;
      req.ignore_eos = true;
      if (a > 0) req.lora = names[a - 1];
      jobs.push_back(
          {engine->submit(req),
           a == 0 ? prompts[i].greedy
                  : ids_of(golden->tensor("greedy_" + names[a - 1] + "." + std::to_string(i)))});
    }
  engine->run_until_idle();
  for (size_t j = 0; j < jobs.size(); j++) {
    std::vector<int32_t> got;
    while (auto c = jobs[j].first->pop(std::chrono::milliseconds(0)))
      for (auto& t : c->tokens) got.push_back(t.token);
    EXPECT_EQ(got, jobs[j].second) << "job " << j;
  }
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

std::vector<TpCase> lora_cases() {
  std::vector<TpCase> out;
  for (const std::string& arch : lora_archs()) out.push_back({arch, 2});
  out.push_back({"llama", 4});  // KV heads replicated: B's k and v rows on two ranks each
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelLora, ::testing::ValuesIn(lora_cases()),
                         [](const auto& info) {
                           return info.param.arch + "_tp" + std::to_string(info.param.size);
                         });

// --- GPU ranks through NCCL (each skips without the GPUs it needs, or without NCCL) ---

// Why GPU ranks cannot run here, or "" when `gpus` GPUs and NCCL are present.
std::string gpu_ranks_missing(int gpus) {
  if (cuda_device_count() < gpus) return fmt::format("needs {} GPU(s)", gpus);
  if (!nccl_available()) return "built without NCCL (TANDEM_NCCL, NCCL_ROOT)";
  return "";
}

// The oracle fixture as `size` GPU ranks (rank r on GPU r), as `serve -tp N --device cuda`
// (or TANDEM_TP_EXECUTOR=1 at N = 1) loads it.
cli::LoadedModel load_gpu_ranks(const std::string& arch, int size) {
  cli::LoadedModel m;
  m.backend = make_cuda_backend(0);
  m.tp_ranks =
      TpRanks::load(oracle_dir(arch), size, LoadOptions{.tp = {.size = size}}, *m.backend, m.model);
  return m;
}

// Greedy continuations of the oracle prompts, all at once (batch 8, prompts chunked beside
// decoding rows). Both executors record decode graphs, and the engine does not overlap
// steps, so both see the same steps.
std::vector<std::vector<int32_t>> engine_greedy(cli::LoadedModel& m, const std::string& arch) {
  const ExecutorConfig graphs{.graphs = true};
  std::unique_ptr<Executor> executor =
      m.tp_ranks ? make_tensor_parallel_executor(std::move(m.backend), std::move(m.model),
                                                 std::move(m.tp_ranks), graphs)
                 : make_executor(std::move(m.backend), std::move(m.model), graphs);
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = 16;
  config.kv_budget_bytes = int64_t(64) << 20;  // the same cache for both executors
  config.overlap = Overlap::Off;
  Engine engine(std::move(executor), m.tokenizer, config);
  std::vector<std::vector<int32_t>> out = serve_greedy(engine, load_oracle(arch), true).tokens;
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
  return out;
}

// The GPU ranks' teacher-forced logits of every oracle prompt and its greedy continuation
// against one GPU's, within `tolerance` (relative).
void expect_teacher_forced_near(cli::LoadedModel& one, cli::LoadedModel& tp,
                                const std::string& arch, double tolerance) {
  for (auto& p : load_oracle(arch)) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    Tensor want = teacher_forced_logits(*one.model, *one.backend, ids);
    Tensor got = teacher_forced_logits(*tp.tp_ranks, ids);
    ASSERT_EQ(got.numel(), want.numel());
    EXPECT_LE(relative_error(got.ptr<float>(), want.ptr<float>(), size_t(got.numel())), tolerance)
        << "prompt of " << p.prompt.size() << " tokens at TP=" << tp.tp_ranks->size();
  }
}

class TensorParallelNccl : public ::testing::TestWithParam<std::string> {};

// The seam at one rank: the vocabulary-slice lookup (on the device), the all-reduces and
// the gathered logits are identities, so logits and greedy ids are the single worker's.
TEST_P(TensorParallelNccl, OneRankEqualsTheSingleWorkerExecutor) {
  if (const std::string why = gpu_ranks_missing(1); !why.empty()) GTEST_SKIP() << why;
  const std::string arch = GetParam();
  cli::LoadedModel one = cli::load_model_folder(oracle_dir(arch), "cuda");
  cli::LoadedModel tp = load_gpu_ranks(arch, 1);
  ASSERT_TRUE(tp.tp_ranks);
  expect_teacher_forced_near(one, tp, arch, 1e-6);
  const auto want = engine_greedy(one, arch), got = engine_greedy(tp, arch);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
}

// Two ranks or more on as many GPUs: the sums run in NCCL's order over bf16 partial sums,
// so the logits match one GPU's within bf16's noise, and the engine serves every prompt.
TEST_P(TensorParallelNccl, RanksOnSeveralGpusMatchOneGpu) {
  const int n = std::min(cuda_device_count(), 4);
  if (const std::string why = gpu_ranks_missing(2); !why.empty()) GTEST_SKIP() << why;
  const std::string arch = GetParam();
  cli::LoadedModel one = cli::load_model_folder(oracle_dir(arch), "cuda");
  const int size = n == 3 ? 2 : n;  // the fixtures' heads split by 2 and 4
  cli::LoadedModel tp = load_gpu_ranks(arch, size);
  expect_teacher_forced_near(one, tp, arch, 3e-2);
  const std::vector<OraclePrompt> prompts = load_oracle(arch);
  const auto got = engine_greedy(tp, arch);
  for (size_t i = 0; i < prompts.size(); i++)
    EXPECT_EQ(got[i].size(), prompts[i].greedy.size()) << "prompt " << i;
}

// Gemma 4's MoE with per-layer inputs and Gemma 3n's gathered sparsity statistics too.
INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelNccl,
                         ::testing::Values("llama", "gemma2", "gemma4_moe", "gemma3n"),
                         [](const auto& info) { return info.param; });

// More ranks than GPUs: a clear error naming both, before any rank loads.
TEST(TensorParallelNcclErrors, MoreRanksThanGpusIsRefused) {
  if (const std::string why = gpu_ranks_missing(1); !why.empty()) GTEST_SKIP() << why;
  const int gpus = cuda_device_count();
  try {
    load_gpu_ranks("llama", gpus + 1);
    FAIL() << "-tp " << gpus + 1 << " on " << gpus << " GPU(s) was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("has {}", gpus)), std::string::npos)
        << e.what();
  }
}

// A draft model beside the ranks (--speculative-config with -tp 2): the draft whole on rank
// 0's backend, the verify the ranks' forward. The embedded tiny-kjv and its draft, eight
// prompts at once: exactly the continuations -tp 2 gives without speculation, with proposals
// accepted on the way.
TEST(TensorParallelSpeculative, ADraftModelBesideTheRanksKeepsGreedy) {
  const std::filesystem::path models =
      std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." / "models";
  const std::vector<std::string> texts = {"In the beginning God created",
                                          "And the LORD said unto",
                                          "Blessed are the",
                                          "For God so loved",
                                          "The LORD is my shepherd",
                                          "And it came to pass",
                                          "Thou shalt not",
                                          "In my Father's house"};
  auto run = [&](bool speculate, SpecDecodeStats* stats) {
    cli::LoadedModel m = load_ranks_at(models / "tiny-kjv", 2);
    EngineConfig config;
    config.scheduler.max_rows = 8;
    if (speculate) {
      SpeculativeConfig spec{.method = SpecMethod::DraftModel, .num_speculative_tokens = 4};
      spec.model = (models / "tiny-kjv-draft").string();
      spec.adaptive = false;  // every row proposes whenever it can
      cli::load_draft_model(m, spec);
      config.speculative = spec;
    }
    std::unique_ptr<Engine> engine = cli::make_engine(m, config, std::nullopt);
    std::vector<OraclePrompt> prompts(texts.size());
    for (size_t i = 0; i < texts.size(); i++) {
      prompts[i].prompt = m.tokenizer->encode(texts[i], true);
      prompts[i].greedy.resize(24);
    }
    Served out = serve_greedy(*engine, prompts, /*batched=*/true);
    if (stats) *stats = engine->stats().spec_decode;
    EXPECT_EQ(engine->kv_blocks().num_used(), 0);
    return out.tokens;
  };
  SpecDecodeStats stats;
  const auto plain = run(false, nullptr), drafted = run(true, &stats);
  ASSERT_EQ(plain.size(), texts.size());
  for (size_t i = 0; i < texts.size(); i++) {
    EXPECT_EQ(plain[i].size(), 24u);
    EXPECT_EQ(drafted[i], plain[i]) << texts[i];
  }
  std::printf("draft beside -tp 2: %lld of %lld proposals accepted\n",
              (long long)stats.num_accepted_tokens, (long long)stats.num_draft_tokens);
  EXPECT_GT(stats.num_draft_tokens, 0);
  EXPECT_GT(stats.num_accepted_tokens, 0) << "the draft's proposals were never accepted";
}

}  // namespace tensor_parallel_test
}  // namespace tandem::test
