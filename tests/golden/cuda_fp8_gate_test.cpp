// The CUDA FP8 gate (issue 20): on every FP8 oracle fixture (tests/data/oracle/fp8/) and on
// the llama oracle quantized at load (--quantization fp8), the teacher-forced logits of the
// CUDA FP8 path against the CPU FP8 twin: mean KL(cpu ‖ cuda) ≤ 1e-3 over every position
// of the fixture's prompts. (The GPU's activations are bf16, the twin's f32, so the two
// round some activations to neighbouring e4m3 values; the KL bounds what that costs.)
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/teacher_forcing.h"
#include "loader/safetensors.h"
#include "model/model.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace {

double mean_kl(const Tensor& ref, const Tensor& ours) {
  const int64_t V = ref.cols();
  double total = 0;
  for (int64_t t = 0; t < ref.rows(); t++) {
    const float* a = ref.ptr<float>() + t * V;
    const float* b = ours.ptr<float>() + t * V;
    double ma = a[0], mb = b[0];
    for (int64_t i = 1; i < V; i++) ma = std::max(ma, double(a[i])), mb = std::max(mb, double(b[i]));
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < V; i++) sa += std::exp(a[i] - ma), sb += std::exp(b[i] - mb);
    double kl = 0;
    for (int64_t i = 0; i < V; i++) {
      const double la = a[i] - ma - std::log(sa), lb = b[i] - mb - std::log(sb);
      kl += std::exp(la) * (la - lb);
    }
    total += kl;
  }
  return total / double(ref.rows());
}

// Mean KL over the prompts' teacher-forced positions: `dir` loaded on both backends.
double cpu_cuda_kl(const std::filesystem::path& dir, const std::vector<std::vector<int32_t>>& prompts,
                   const std::optional<QuantScheme>& online) {
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  auto cpu_model = load_model(dir, *cpu, LoadOptions{.online = online});
  auto gpu_model = load_model(dir, *gpu, LoadOptions{.online = online});
  double sum = 0;
  for (const auto& ids : prompts) {
    Tensor ref = teacher_forced_logits(*cpu_model, *cpu, ids);
    Tensor ours = teacher_forced_logits(*gpu_model, *gpu, ids);
    EXPECT_EQ(ref.numel(), ours.numel());
    sum += mean_kl(ref, ours);
  }
  return sum / double(prompts.size());
}

TEST(CudaFp8Gate, CheckpointFixturesAgreeWithTheCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  int fixtures = 0;
  for (auto& e : std::filesystem::directory_iterator(std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "fp8")) {
    if (!std::filesystem::exists(e.path() / "fp8_golden.safetensors")) continue;
    auto golden = SafetensorsFile::open(e.path() / "fp8_golden.safetensors");
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; golden->has("ids." + std::to_string(i)); i++) {
      const Tensor ids = golden->tensor("ids." + std::to_string(i));
      prompts.emplace_back(ids.ptr<int32_t>(), ids.ptr<int32_t>() + ids.numel());
    }
    const double kl = cpu_cuda_kl(e.path(), prompts, std::nullopt);
    std::printf("%s: mean KL(cpu fp8 || cuda fp8) %.2e\n", e.path().filename().c_str(), kl);
    EXPECT_LE(kl, 1e-3) << e.path();
    fixtures++;
  }
  EXPECT_GE(fixtures, 2);
}

TEST(CudaFp8Gate, OnlineQuantizationAgreesWithTheCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  for (const char* arch : {"llama", "qwen3", "gemma3"}) {
    std::vector<std::vector<int32_t>> prompts;
    for (auto& p : load_oracle(arch)) {
      prompts.push_back(p.prompt);
      prompts.back().insert(prompts.back().end(), p.greedy.begin(), p.greedy.end());
    }
    const double kl = cpu_cuda_kl(oracle_dir(arch), prompts, online_quantization("fp8"));
    std::printf("%s --quantization fp8: mean KL(cpu || cuda) %.2e\n", arch, kl);
    EXPECT_LE(kl, 1e-3) << arch;
  }
}

}  // namespace
}  // namespace tandem::test
