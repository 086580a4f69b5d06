// The CUDA gates (issue 6): the oracle models run in bf16 on the GPU.
//   1. Teacher-forced: mean KL(oracle ‖ ours) ≤ 1e-3, and top-1 agreement with the fp32
//      oracle ≥ 99% of the positions the oracle decides: those whose top-2 logit gap is at
//      least kDecided. The tiny random fixtures have near-flat distributions; where two
//      logits are closer than bf16 weights can resolve (their per-logit error is ~1e-2),
//      either order is a faithful bf16 answer. Raw agreement is printed beside it.
//      Where transformers' own bf16 run misses those bounds on a fixture (its figures are
//      in hf_bf16.json beside the fixture, written on the GPU machine by
//      bench/hf_bf16_oracle_kl.py --write), the bounds become transformers' figures: KL
//      within 1.1x of its KL and top-1 at least its top-1. Both MoE fixtures are so: their
//      routers' top-k margins are smaller than bf16 activations resolve, so the chosen
//      experts flip at a few positions in any bf16 run (transformers': qwen3_moe 2.6e-3,
//      mixtral 8.0e-3).
//   2. Batch gate: all prompts at once at --batch 8 (also with a 16-token budget, so
//      prompts are chunked and mixed with decoding) give exactly the greedy tokens each
//      prompt gets alone on the GPU.
// Every test skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace cuda_gate_test {

bool have_gpu() { return cuda_device_count() > 0; }

// log_softmax of one row, in double.
std::vector<double> log_softmax(const float* x, int64_t n) {
  double max = x[0];
  for (int64_t i = 1; i < n; i++) max = std::max(max, double(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += std::exp(double(x[i]) - max);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) out[size_t(i)] = double(x[i]) - max - std::log(sum);
  return out;
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

// Gap between the largest and second-largest logit.
float top2_gap(const float* x, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] > a) b = a, a = x[i];
    else if (x[i] > b) b = x[i];
  }
  return a - b;
}

constexpr float kDecided = 0.05f;

// The gate's bounds for one fixture: the absolute ones, or transformers' own bf16 figures
// where those miss them (hf_bf16.json, when it was measured).
struct Bf16Bounds {
  double kl = 1e-3, top1_decided = 0.99;
  bool from_transformers = false;
};

Bf16Bounds bounds_for(const std::string& arch) {
  Bf16Bounds b;
  std::ifstream f(oracle_dir(arch) / "hf_bf16.json");
  if (!f) return b;
  const nlohmann::json ref = nlohmann::json::parse(f);
  const double kl = ref.at("mean_kl").get<double>(), top1 = ref.at("top1_decided").get<double>();
  if (kl <= b.kl && top1 >= b.top1_decided) return b;
  b.kl = std::max(b.kl, 1.1 * kl);
  b.top1_decided = std::min(b.top1_decided, top1);
  b.from_transformers = true;
  return b;
}

// Greedy continuations of `prompts`, all submitted at once.
void generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
              std::vector<std::vector<int32_t>>* out) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& p : prompts) {
    GenerationRequest req;
    req.prompt = p;
    req.max_tokens = max_tokens;
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    streams.push_back(engine.submit(req));
  }
  engine.run_until_idle();
  out->clear();
  for (auto& s : streams) {
    std::vector<int32_t> got;
    while (auto c = s->pop(std::chrono::milliseconds(0))) {
      EXPECT_TRUE(c->error.empty()) << c->error;
      for (auto& t : c->tokens) got.push_back(t.token);
    }
    out->push_back(got);
  }
}

// Gate 1 on one fixture.
void expect_bf16_logits_within_gate(const std::string& arch) {
  auto backend = make_cuda_backend(0);
  auto model = load_model(oracle_dir(arch), *backend);
  int64_t positions = 0, agree = 0, decided = 0, decided_agree = 0;
  double kl_sum = 0;
  for (auto& p : load_oracle(arch)) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    Tensor ours = teacher_forced_logits(*model, *backend, ids);
    ASSERT_EQ(ours.numel(), p.logits.numel());
    int64_t V = ours.cols();
    for (int64_t t = 0; t < ours.rows(); t++) {
      const float* a = ours.ptr<float>() + t * V;
      const float* b = p.logits.ptr<float>() + t * V;
      bool same = argmax(a, V) == argmax(b, V);
      agree += same;
      if (top2_gap(b, V) >= kDecided) decided++, decided_agree += same;
      auto la = log_softmax(a, V), lb = log_softmax(b, V);
      double kl = 0;
      for (int64_t i = 0; i < V; i++) kl += std::exp(lb[size_t(i)]) * (lb[size_t(i)] - la[size_t(i)]);
      kl_sum += kl;
      positions++;
    }
  }
  double top1 = double(agree) / double(positions), kl = kl_sum / double(positions);
  double top1_decided = double(decided_agree) / double(std::max<int64_t>(decided, 1));
  std::printf("[ %-10s ] top-1 agreement %.4f (%.4f of %lld decided positions), mean KL %.2e"
              " over %lld positions\n", arch.c_str(), top1, top1_decided,
              (long long)decided, kl, (long long)positions);
  const Bf16Bounds bound = bounds_for(arch);
  if (bound.from_transformers)
    std::printf("[ %-10s ] bounds from transformers' own bf16 run: KL <= %.2e, top-1 >= %.4f\n",
                arch.c_str(), bound.kl, bound.top1_decided);
  EXPECT_GE(top1_decided, bound.top1_decided);
  EXPECT_GE(decided, 20) << "too few decided positions for the check to mean much";
  EXPECT_LE(kl, bound.kl);
}

class CudaGate : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGate, Bf16LogitsAgreeWithTheFp32Oracle) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU on this machine";
  expect_bf16_logits_within_gate(GetParam());
}

// Fixtures that take gate 1 only: the Gemma 4 variants whose attention is so sharp that
// bf16 rounding grows through it (transformers' own bf16 run: top-1 0.68-0.80 of the
// decided positions, hf_bf16.json). There a step of 8 rows rounds its GEMMs unlike a step
// of 1 (the tensor cores against the weight stream), and greedy continuations part after
// 10-20 equal tokens, batched or not, so gate 2's exact equality does not apply.
class CudaGateLogitsOnly : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGateLogitsOnly, Bf16LogitsAgreeWithTheFp32Oracle) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU on this machine";
  expect_bf16_logits_within_gate(GetParam());
}

TEST_P(CudaGate, BatchedGreedyEqualsSoloOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU on this machine";
  auto prompts = load_oracle(GetParam());
  std::vector<std::vector<int32_t>> ids;
  for (auto& p : prompts) ids.push_back(p.prompt);
  int n = int(prompts[0].batch_greedy.size());
  auto engine_with = [&](int rows, int budget) {
    auto backend = make_cuda_backend(0);
    auto model = load_model(oracle_dir(GetParam()), *backend);
    EngineConfig config;
    config.scheduler.max_rows = rows;
    config.scheduler.max_batched_tokens = budget;
    return std::make_unique<Engine>(make_executor(std::move(backend), std::move(model)), nullptr,
                                    config);
  };
  std::vector<std::vector<int32_t>> solo;
  {
    auto engine = engine_with(1, 2048);
    for (auto& p : ids) {
      std::vector<std::vector<int32_t>> one;
      generate(*engine, {p}, n, &one);
      solo.push_back(one[0]);
    }
  }
  for (int budget : {2048, 16}) {
    auto engine = engine_with(8, budget);
    std::vector<std::vector<int32_t>> batched;
    generate(*engine, ids, n, &batched);
    for (size_t i = 0; i < ids.size(); i++)
      EXPECT_EQ(batched[i], solo[i]) << "prompt " << i << ", budget " << budget;
    EXPECT_EQ(engine->kv_blocks().num_used(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaGate,
                         ::testing::Values("llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2",
                                           "gemma3", "qwen3_moe", "mixtral", "gemma3n", "gemma4",
                                           "gemma4_moe"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Architectures, CudaGateLogitsOnly,
                         ::testing::Values("gemma4_kvshare", "gemma4_moe_nople"),
                         [](const auto& info) { return info.param; });

}  // namespace cuda_gate_test
}  // namespace tandem::test
