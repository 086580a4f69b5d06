// Embeddings on the GPU (bf16): every pooling of every oracle fixture, all inputs batched
// and chunked (16-token budget) beside generating rows, against the CPU engine's f32
// vectors: cosine similarity ≥ 0.999 and relative error ≤ 3e-2 (bf16 activations and
// weights; the logit gates of cuda_gate_test.cpp allow the same order of error). Also: a
// batch equals each input alone on the GPU, and the prefix cache gives the same vector.
// Every test skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace {

std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(TANDEM_TEST_DATA) / "oracle"))
    if (std::filesystem::exists(e.path() / "golden.safetensors")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<Engine> engine_on(bool gpu, const std::string& arch, EngineConfig config = {}) {
  auto backend = gpu ? make_cuda_backend() : make_cpu_backend();
  auto model = load_model(oracle_dir(arch), *backend);
  return std::make_unique<Engine>(make_executor(std::move(backend), std::move(model)), nullptr, config);
}

GenerationRequest embedding(const std::vector<int32_t>& prompt, Pooling p) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = 0;
  r.pooling = p;
  return r;
}

std::vector<std::vector<float>> run(Engine& e, const std::vector<GenerationRequest>& rs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : rs) streams.push_back(e.submit(r));
  e.run_until_idle();
  std::vector<std::vector<float>> out;
  for (auto& s : streams) {
    std::vector<float> v;
    while (auto c = s->pop(std::chrono::milliseconds(0)))
      if (!c->embedding.empty()) v = c->embedding;
    out.push_back(v);
  }
  return out;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); i++) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

class CudaEmbedding : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEmbedding, BatchedGpuVectorsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  std::vector<GenerationRequest> all;
  for (const OraclePrompt& p : load_oracle(GetParam()))
    for (Pooling pooling : {Pooling::Last, Pooling::Mean, Pooling::Cls}) all.push_back(embedding(p.prompt, pooling));
  auto cpu = engine_on(false, GetParam());
  const auto want = run(*cpu, all);
  EngineConfig chunked;
  chunked.scheduler.max_rows = 8;
  chunked.scheduler.max_batched_tokens = 16;
  auto gpu = engine_on(true, GetParam(), chunked);
  GenerationRequest gen;
  gen.prompt = load_oracle(GetParam())[0].prompt;
  gen.max_tokens = 20;
  gen.sampling.temperature = 0;
  gen.ignore_eos = true;
  auto generating = gpu->submit(gen);
  const auto got = run(*gpu, all);
  for (size_t i = 0; i < all.size(); i++) {
    SCOPED_TRACE(fmt::format("input {} ({})", i, pooling_name(*all[i].pooling)));
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_GE(cosine(got[i], want[i]), 0.999);
    EXPECT_LE(relative_error(got[i].data(), want[i].data(), want[i].size()), 3e-2);
  }
  int tokens = 0;
  while (auto c = generating->pop(std::chrono::milliseconds(0))) tokens += int(c->tokens.size());
  EXPECT_EQ(tokens, 20);
  // The prefix cache: the same inputs again read their cached blocks (last pooling).
  const auto again = run(*gpu, all);
  for (size_t i = 0; i < all.size(); i++)
    EXPECT_GE(cosine(again[i], got[i]), 0.9999) << "input " << i;
  EXPECT_EQ(gpu->kv_blocks().num_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaEmbedding, ::testing::ValuesIn(fixtures()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem::test
