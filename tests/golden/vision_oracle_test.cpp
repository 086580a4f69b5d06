// Gate 1 for images (issue 41): on the three vision oracles (Gemma 3 with SigLIP; Gemma 4
// with bidirectional image attention; Gemma 4 causal with clipped linears and per-layer
// inputs), with the processor's input_ids and pixel values:
//   - teacher-forced logits within 1e-4 relative, in one step and in chunks of 7 (which
//     never split an image);
//   - greedy continuations identical through the engine, each case alone;
//   - all cases submitted at once to `--batch 8` return their solo outputs, also with
//     --max-batched-tokens 16 (an image then takes a step over the budget) and under KV
//     pressure (rows preempted and recomputed, their images read from the encoder cache);
//     no KV block is held at the end;
//   - `tandem generate --image FILE --prompt TEXT` (case 0: one image, then text) builds the
//     processor's input_ids from the image file and the chat template, and prints the
//     oracle's greedy continuation.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/image_prompt.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "engine/teacher_forcing.h"
#include "oracle_fixture.h"
#include "vision_fixture.h"

namespace tandem::test {
namespace vision_oracle_test {

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<VisionCase> cases_of(const std::string& name, Model& model) {
  const VisionSpec& v = model.vision_spec();
  EXPECT_TRUE(v.takes_images) << name;
  std::vector<VisionCase> cases = load_vision_oracle(name, v.image_token_id);
  EXPECT_EQ(cases.size(), 5u);
  return cases;
}

class VisionOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionOracle, TeacherForcedLogitsMatch) {
  auto backend = make_cpu_backend();
  auto model = load_model(vision_oracle_dir(GetParam()), *backend);
  for (const VisionCase& c : cases_of(GetParam(), *model)) {
    const std::vector<int32_t> ids = concat(c.prompt, c.greedy);
    for (int chunk : {0, 7}) {
      Tensor ours = teacher_forced_logits(*model, *backend, ids, chunk, 16, 0, c.media);
      ASSERT_EQ(ours.numel(), c.logits.numel());
      EXPECT_LE(relative_error(ours.ptr<float>(), c.logits.ptr<float>(), size_t(ours.numel())),
                1e-4)
          << c.media.size() << " images, " << c.prompt.size() << " tokens, chunk " << chunk;
    }
  }
}

std::vector<int32_t> drain(RequestStream& s) {
  std::vector<int32_t> got;
  while (auto c = s.pop(std::chrono::milliseconds(0)))
    for (auto& t : c->tokens) got.push_back(t.token);
  return got;
}

TEST_P(VisionOracle, GreedyMatchesThroughTheEngine) {
  auto backend = make_cpu_backend();
  auto model = load_model(vision_oracle_dir(GetParam()), *backend);
  const std::vector<VisionCase> cases = cases_of(GetParam(), *model);
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, EngineConfig{});
  EXPECT_TRUE(engine.model_info().vision.takes_images);
  for (const VisionCase& c : cases) {
    auto stream = engine.submit(vision_request(c, int(c.greedy.size())));
    engine.run_until_idle();
    EXPECT_EQ(drain(*stream), c.greedy)
        << c.media.size() << " images, " << c.prompt.size() << " tokens";
  }
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
}

TEST_P(VisionOracle, GenerateWithImageFilesGivesTheProcessorsPromptAndTheGreedy) {
  const std::filesystem::path dir = vision_oracle_dir(GetParam());
  nlohmann::json golden = nlohmann::json::parse(std::ifstream(dir / "golden.json"));
  const nlohmann::json& case0 = golden["cases"][0];
  ASSERT_EQ(case0["images"].size(), 1u);
  const std::string text = case0["messages"][0]["content"][1]["text"].get<std::string>();
  const std::string image = (dir / case0["images"][0].get<std::string>()).string();
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend);
  const VisionCase c = cases_of(GetParam(), *model)[0];
  cli::ImageFiles files{dir, dir, Tokenizer::load(dir), model->vision_spec(), {image}};
  const cli::ImagePrompt prompt = cli::chat_image_prompt(files, text);
  EXPECT_EQ(prompt.ids, c.prompt);
  ASSERT_EQ(prompt.media.size(), c.media.size());
  EXPECT_EQ(prompt.media[0].start, c.media[0].start);
  EXPECT_EQ(prompt.media[0].length, c.media[0].length);
  EXPECT_EQ(cli::image_spans_for_ids(files, c.prompt)[0].length, c.media[0].length);

  cli::GenerateOptions o;
  o.model = dir.string();
  o.device = "cpu";
  o.prompt = text;
  o.images = {image};
  o.max_tokens = int(c.greedy.size());
  o.ignore_eos = true;
  o.json = true;
  ::testing::internal::CaptureStdout();
  const int rc = cli::run_generate(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(nlohmann::json::parse(out)["ids"].get<std::vector<int32_t>>(), c.greedy);

  o.images = {(dir / "config.json").string()};  // not an image
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cli::run_generate(o), 1);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("--image " + o.images[0] + ": "),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Folders, VisionOracle,
                         ::testing::Values("gemma3_vision", "gemma4_vision_bidir",
                                           "gemma4_vision_causal"),
                         [](const auto& info) { return info.param; });

// The smallest KV budget whose full-attention pool holds `tokens` tokens (no prefix cache).
int64_t budget_for(Model& model, int tokens, int max_batched_tokens) {
  const std::vector<LayerKvSpec> specs = model.kv_specs();
  const int64_t step = kv_bytes_per_block(specs, 16, DType::F32);
  for (int64_t budget = step;; budget += step) {
    KvSizing s{.block_size = 16,
               .max_rows = 8,
               .max_batched_tokens = max_batched_tokens,
               .max_model_len = 256,
               .budget_bytes = budget,
               .prefix_caching = false};
    if (make_kv_block_manager(specs, DType::F32, s).max_sequence_tokens() >= tokens) return budget;
  }
}

struct BatchCase {
  std::string folder;
  int max_batched_tokens;
};

class VisionBatchGate : public ::testing::TestWithParam<BatchCase> {};

TEST_P(VisionBatchGate, AllCasesTogetherReturnTheirSoloOutputs) {
  const BatchCase& b = GetParam();
  auto backend = make_cpu_backend();
  auto model = load_model(vision_oracle_dir(b.folder), *backend);
  const std::vector<VisionCase> cases = cases_of(b.folder, *model);
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = b.max_batched_tokens;
  config.max_model_len = 256;
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int round = 0; round < 2; round++)  // each case twice: the second meets the first's image
    for (const VisionCase& c : cases)
      streams.push_back(engine.submit(vision_request(c, int(c.greedy.size()))));
  engine.run_until_idle();
  for (size_t i = 0; i < streams.size(); i++)
    EXPECT_EQ(drain(*streams[i]), cases[i % cases.size()].greedy) << "request " << i;
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
}

// KV pressure: a pool that takes two prompts of an image case at once but not their
// continuations, so rows are preempted, recompute their images' tokens (from the encoder
// cache) and still return their solo outputs.
TEST_P(VisionBatchGate, PreemptedImageRowsReturnTheirSoloOutputs) {
  const BatchCase& b = GetParam();
  auto backend = make_cpu_backend();
  auto model = load_model(vision_oracle_dir(b.folder), *backend);
  const std::vector<VisionCase> cases = cases_of(b.folder, *model);
  // An image case whose continuation needs a block its prompt did not (growth, not
  // admission, runs out of blocks), the shortest such prompt.
  const VisionCase* pick = nullptr;
  for (const VisionCase& c : cases) {
    const int p = int(c.prompt.size()), computed = p + int(c.greedy.size()) - 1;
    if (!c.media.empty() && (computed + 15) / 16 > (p + 15) / 16 &&
        (!pick || p < int(pick->prompt.size())))
      pick = &c;
  }
  ASSERT_NE(pick, nullptr);
  const VisionCase& image = *pick;
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = b.max_batched_tokens;
  config.max_model_len = 256;
  config.enable_prefix_caching = false;  // each copy holds its own blocks
  config.kv_budget_bytes =
      budget_for(*model, 2 * (int(image.prompt.size() + 15) / 16 * 16), b.max_batched_tokens);
  Engine engine(make_executor(std::move(backend), std::move(model)), nullptr, config);
  std::vector<const VisionCase*> order = {&image, &image, &cases[4], &image, &image, &cases[4]};
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const VisionCase* c : order)
    streams.push_back(engine.submit(vision_request(*c, int(c->greedy.size()))));
  engine.run_until_idle();
  for (size_t i = 0; i < streams.size(); i++)
    EXPECT_EQ(drain(*streams[i]), order[i]->greedy) << "request " << i;
  EXPECT_GT(engine.stats().num_preemptions, 0);
  EXPECT_EQ(engine.kv_blocks().num_used(), 0);
}

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> out;
  for (const char* f : {"gemma3_vision", "gemma4_vision_bidir", "gemma4_vision_causal"})
    for (int budget : {2048, 16}) out.push_back({f, budget});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Folders, VisionBatchGate, ::testing::ValuesIn(batch_cases()),
                         [](const auto& info) {
                           return info.param.folder + "_budget" +
                                  std::to_string(info.param.max_batched_tokens);
                         });

}  // namespace vision_oracle_test
}  // namespace tandem::test
