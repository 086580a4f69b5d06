// llama.cpp's oracle files served as `tandem serve --model FILE.gguf --batch 8` runs
// (the tokenizer, chat template and weight types from the file): every prompt posted at once
// comes back as the float64 reference's greedy path, with whole prompts and with prompts
// chunked 16 tokens a step among decoding rows; the same prompts again hit the prefix cache
// and still give the same tokens; every KV block is free afterwards. A chat request renders
// the file's ChatML template. Under the default arithmetic (int8 activations on block weights)
// the files whose reference paths leave room for it (F32; Q4_K_M, whose prompts keep a top-1 −
// top-2 gap >= 0.15); every quantized file under the exact arithmetic. Then GGUF with the other
// features: structured output, the fp8 KV cache, perplexity and eval.
#include <gtest/gtest.h>

#include <algorithm>

#include <latch>
#include <thread>

#include <unistd.h>
#include <fstream>
#include "../unit/cli/local_server.h"
#include "cli/commands.h"
#include "engine/kv_layout.h"
#include "engine/model_runner.h"
#include "engine/step_plan.h"
#include "gguf_golden.h"
#include "kv/block_pool.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace gguf_serve_gate_test {

using server::Json;

std::vector<Json> post_all(int port, const std::vector<GgufGolden>& prompts) {
  std::vector<Json> replies(prompts.size());
  std::latch start(std::ptrdiff_t(prompts.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      Json body = {{"prompt", prompts[i].prompt}, {"max_tokens", prompts[i].greedy.size()},
                   {"temperature", 0},           {"ignore_eos", true},
                   {"return_token_ids", true}};
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(120, 0);
      const std::string text = body.dump();
      start.arrive_and_wait();
      auto res = client.Post("/v1/completions", text, "application/json");
      if (res && res->status == 200) replies[i] = Json::parse(res->body);
    });
  for (auto& t : threads) t.join();
  return replies;
}

struct ServeCase {
  std::string file;
  int max_batched_tokens;
  std::optional<cpu::BlockArithmetic> arithmetic;  // none: the default
};

class GgufServeGate : public ::testing::TestWithParam<ServeCase> {};

TEST_P(GgufServeGate, BatchedGreedyIsTheReferences) {
  const std::string& file = GetParam().file;
  const std::vector<GgufGolden> prompts = load_gguf_golden(file);
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = GetParam().max_batched_tokens;
  config.max_model_len = 256;
  config.served_model_name = "llama";
  LocalServer served(gguf_dir() / file, config, {}, {}, GetParam().arithmetic);
  for (int round = 0; round < 2; round++) {  // the second round reuses cached prefixes
    std::vector<Json> replies = post_all(served.port(), prompts);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(replies[i].is_object()) << "prompt " << i << " got no reply";
      EXPECT_EQ(replies[i]["choices"][0]["token_ids"].get<std::vector<int32_t>>(), prompts[i].greedy)
          << "round " << round << ", prompt " << i;
    }
  }
  Json stats = served.settled_stats();
  EXPECT_EQ(stats["kv_blocks"]["used"], 0) << stats.dump();
  EXPECT_GT(stats["prefix_cache"]["hits_total"].get<int64_t>(), 0) << stats.dump();
}

constexpr auto kExact = cpu::BlockArithmetic::Exact;

// Q4_K_M's reference greedy paths keep a top-1 − top-2 gap of 0.15 at every step, wide enough
// for 8-bit activations (the oracle README); the F32 file's at f32 accuracy.
INSTANTIATE_TEST_SUITE_P(Files, GgufServeGate,
                         ::testing::Values(ServeCase{"llama-F32.gguf", 2048},
                                           ServeCase{"llama-F32.gguf", 16},
                                           ServeCase{"llama-Q4_K_M.gguf", 2048},
                                           ServeCase{"llama-Q4_K_M.gguf", 16},
                                           ServeCase{"llama-Q8_0.gguf", 16, kExact},
                                           ServeCase{"llama-Q4_0.gguf", 16, kExact},
                                           ServeCase{"llama-Q5_K_M.gguf", 16, kExact}),
                         [](const auto& info) {
                           std::string f = info.param.file.substr(6, info.param.file.size() - 11);
                           return f + "_budget" + std::to_string(info.param.max_batched_tokens) +
                                  (info.param.arithmetic ? "_exact" : "");
                         });

// /v1/models and /stats name the file's weight types: the file type, then each tensor type
// and how many tensors hold it (Q4_K_M: attn_v, ffn_down and output in Q6_K).
TEST(GgufServe, ModelsAndStatsNameTheWeightTypes) {
  EngineConfig config;
  config.served_model_name = "q4";
  LocalServer served(gguf_dir() / "llama-Q4_K_M.gguf", config);
  httplib::Client client("127.0.0.1", served.port());
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  const std::string want = "Q4_K_M: q4_k 6, f32 4, q6_k 3";
  EXPECT_EQ(Json::parse(models->body)["data"][0]["weight_format"], want) << models->body;
  EXPECT_NE(served.settled_stats().dump().find(want), std::string::npos);
}

TEST(GgufServe, ChatUsesTheFilesTemplate) {
  EngineConfig config;
  config.served_model_name = "llama-F32";
  LocalServer served(gguf_dir() / "llama-F32.gguf", config);
  httplib::Client client("127.0.0.1", served.port());
  Json body = {{"model", "llama-F32"},
               {"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"max_tokens", 3},
               {"temperature", 0}};
  auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  // "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n": the ChatML template of the file.
  EXPECT_EQ(Json::parse(res->body)["usage"]["prompt_tokens"], 16) << res->body;
}

// Where GGUF meets the other features (issue 42, item 8), each on a GGUF model:
//   - structured output: a json_schema response from the served Q4_K_M oracle file is valid JSON
//     of the schema;
//   - the fp8 KV cache: the Q4_K_M file's teacher-forced logits over an f8_e4m3 cache stay near
//     the reference (the K/V rounding is the only new error) and a batch through the engine
//     frees every block;
//   - `tandem perplexity` and `tandem eval` on the oracle llama written as an F32 GGUF give the
//     folder's own numbers.
// (PEFT adapters over GGUF weights: gguf_arch_test.cpp; the prefix cache:
// gguf_serve_gate_test.cpp.)

namespace fs = std::filesystem;
using server::Json;

TEST(GgufFeatures, StructuredOutputFollowsTheSchema) {
  EngineConfig config;
  config.served_model_name = "q4";
  LocalServer served(gguf_dir() / "llama-Q4_K_M.gguf", config);
  httplib::Client client("127.0.0.1", served.port());
  const Json schema = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}, {"maxLength", 8}}},
                         {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
                       {"required", {"name", "n"}},
                       {"additionalProperties", false}};
  for (int seed = 0; seed < 3; seed++) {
    Json body = {{"model", "q4"},
                 {"messages", {{{"role", "user"}, {"content", "a name and a number"}}}},
                 {"max_tokens", 96},
                 {"temperature", 1.0},
                 {"seed", seed},
                 {"response_format",
                  {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}};
    auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const Json reply = Json::parse(res->body)["choices"][0];
    EXPECT_EQ(reply["finish_reason"], "stop") << reply.dump();
    const Json out = Json::parse(reply["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(out.is_object()) << reply.dump();
    EXPECT_EQ(out.size(), 2u) << out.dump();
    ASSERT_TRUE(out["name"].is_string()) << out.dump();
    // maxLength counts code points (JSON Schema), not UTF-8 bytes.
    const std::string name = out["name"].get<std::string>();
    EXPECT_LE(std::count_if(name.begin(), name.end(),
                            [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }),
              8)
        << out.dump();
    ASSERT_TRUE(out["n"].is_number_integer()) << out.dump();
    EXPECT_GE(out["n"].get<int>(), 0);
    EXPECT_LE(out["n"].get<int>(), 99);
  }
}

// Logits [ids, vocab] of one teacher-forced forward over a KV cache of `kv_dtype`.
Tensor forced_logits(Model& model, Backend& backend, const std::vector<int32_t>& ids,
                     DType kv_dtype) {
  const int n = int(ids.size()), bs = 16;
  BlockPool pool(blocks_for(n, bs) + 1);
  ModelRunner runner(model, backend, pool.num_blocks(), bs, kv_dtype);
  EXPECT_EQ(runner.kv_dtype(), kv_dtype);
  BlockTables tables(size_t(runner.num_groups()), pool.allocate(blocks_for(n, bs)));
  PlanRow row{ids, 0, n, tables, n};
  return backend.to_host_f32(runner.forward(build_step_plan(std::span(&row, 1), bs)));
}

TEST(GgufFeatures, Fp8KvCacheStaysNearTheReference) {
  auto backend = make_cpu_backend();
  auto model = load_model(gguf_dir() / "llama-Q4_K_M.gguf", *backend);
  for (const GgufGolden& p : load_gguf_golden("llama-Q4_K_M.gguf")) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    const Tensor f32 = forced_logits(*model, *backend, ids, DType::F32);
    const Tensor f8 = forced_logits(*model, *backend, ids, DType::F8E4M3);
    const size_t n = size_t(p.logits.numel());
    const double err_f32 = relative_error(f32.ptr<float>(), p.logits.ptr<float>(), n);
    const double err_f8 = relative_error(f8.ptr<float>(), p.logits.ptr<float>(), n);
    EXPECT_LE(err_f8, 0.12) << "prompt of " << p.prompt.size();
    EXPECT_GT(err_f8, err_f32) << "the f8 cache should cost something";
  }
  EngineConfig config;
  config.scheduler.max_rows = 4;
  Engine engine(make_executor(std::move(backend), std::move(model), {.kv_dtype = DType::F8E4M3}),
                nullptr, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GgufGolden& p : load_gguf_golden("llama-Q4_K_M.gguf")) {
    GenerationRequest req;
    req.prompt = p.prompt;
    req.max_tokens = 16;
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    streams.push_back(engine.submit(req));
  }
  engine.run_until_idle();
  for (auto& s : streams) {
    size_t got = 0;
    while (auto c = s->pop(std::chrono::milliseconds(0))) got += c->tokens.size();
    EXPECT_EQ(got, 16u);
  }
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
}

// The oracle llama (bf16) as an F32 GGUF holds the same numbers: the commands agree with the
// folder's run.
class GgufCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem-gguf-commands-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    file_ = dir_ / "llama.gguf";
    ASSERT_EQ(cli::run_quantize(
                  {.model = oracle_dir("llama").string(), .out = file_.string(), .gguf = "F32"}),
              0);
    std::ofstream(dir_ / "text.txt")
        << "In the beginning God created the heaven and the earth. And the earth was "
           "without form, and void; and darkness was upon the face of the deep.";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_, file_;
};

// "mean_nll X  perplexity Y" from the command's stdout.
double mean_nll(const std::string& model, const fs::path& text) {
  testing::internal::CaptureStdout();
  const int rc =
      cli::run_perplexity({.model = model, .device = "cpu", .file = text.string(), .context = 16});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  const size_t at = out.find("mean_nll ");
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? 0 : std::stod(out.substr(at + 9));
}

TEST_F(GgufCommands, PerplexityIsTheFolders) {
  const double folder = mean_nll(oracle_dir("llama").string(), dir_ / "text.txt");
  const double gguf = mean_nll(file_.string(), dir_ / "text.txt");
  EXPECT_GT(folder, 1.0);
  EXPECT_NEAR(gguf, folder, 1e-4 * folder);
}

TEST_F(GgufCommands, EvalScoresAreTheFolders) {
  std::ofstream(dir_ / "pick.jsonl")
      << R"({"format": "tandem-eval/1", "task": "pick", "kind": "choice", "chance": 0.5, "description": "d", "held_out": "h"})"
      << "\n"
      << R"({"context": "The cat sat on the", "choices": [" mat", " moon"], "gold": 0})"
      << "\n"
      << R"({"context": "And God said", "choices": [" let", " no"], "gold": 0})"
      << "\n";
  auto scores = [&](const std::string& model, const std::string& json) {
    cli::EvalOptions o;
    o.model = model;
    o.device = "cpu";
    o.tasks = {(dir_ / "pick.jsonl").string()};
    o.json = (dir_ / json).string();
    testing::internal::CaptureStdout();
    EXPECT_EQ(cli::run_eval(o), 0);
    testing::internal::GetCapturedStdout();
    return Json::parse(std::ifstream(dir_ / json))["results"][0]["items"];
  };
  const Json folder = scores(oracle_dir("llama").string(), "folder.json");
  const Json gguf = scores(file_.string(), "gguf.json");
  ASSERT_EQ(folder.size(), 2u);
  ASSERT_EQ(gguf.size(), 2u);
  for (size_t i = 0; i < 2; i++)
    for (size_t c = 0; c < 2; c++) {
      const double f = folder[i]["logprobs"][c], g = gguf[i]["logprobs"][c];
      EXPECT_NEAR(g, f, 1e-4 * std::abs(f) + 1e-5) << "item " << i << " choice " << c;
    }
}

}  // namespace gguf_serve_gate_test
}  // namespace tandem::test
