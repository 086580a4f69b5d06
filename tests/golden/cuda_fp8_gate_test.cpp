// The CUDA FP8 gate (issue 20): on every FP8 oracle fixture (tests/data/oracle/fp8/) and on
// the llama, qwen3 and gemma3 oracles quantized at load (--quantization fp8), the
// teacher-forced logits of the CUDA FP8 path against the CPU FP8 twin.
//
// The bound is relative to a yardstick measured in the same test: the KL between the twin
// and the twin fed bf16-rounded inputs at its FP8 linears (CpuBackend::set_fp8_inputs_bf16),
// everything else in f32. The GPU's activations are bf16, and a bf16 rounding ahead of an
// e4m3 one moves a few percent of the quotients across an e4m3 midpoint: a whole e4m3 step
// (1/8 to 1/16) of those terms. On the tiny oracle models that alone costs a mean KL of
// 4-5e-3, what the CUDA path shows (bench/RESULTS.md), so an absolute 1e-3 cannot hold
// for any bf16-activation implementation of the scheme. The gate: KL(cpu || cuda) <=
// 1.25 x the yardstick, and <= 1e-2 (a wrong scale, block or fused shard costs orders more;
// 4e-2 where the yardstick itself is past 1e-2: the MoE oracles' experts quantized at load).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "cli/env_switches.h"
#include "engine/teacher_forcing.h"
#include "loader/safetensors.h"
#include "model/model.h"

#include "fp8_moe_fixture.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace cuda_fp8_gate_test {

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

struct GateKl {
  double cuda = 0;       // mean KL(cpu twin || cuda)
  double yardstick = 0;  // mean KL(cpu twin || cpu twin with bf16 FP8 inputs)
};

// Mean KLs over the prompts' teacher-forced positions: `dir` loaded on each backend (CUDA
// under the process's TANDEM_* switches, as `tandem` runs: TANDEM_FP8_MOE_TC=1 gates the
// FP8 experts' tensor-core kernels); `gpu_format`: where to put the CUDA model's
// weight_format_name.
GateKl gate_kl(const std::filesystem::path& dir, const std::vector<std::vector<int32_t>>& prompts,
               const std::optional<QuantScheme>& online, std::string* gpu_format = nullptr) {
  CpuBackend cpu, cpu_bf16;
  cpu_bf16.set_fp8_inputs_bf16(true);
  auto gpu = make_cuda_backend(0, cli::env_switches().cuda);
  auto cpu_model = load_model(dir, cpu, LoadOptions{.online = online});
  auto bf16_model = load_model(dir, cpu_bf16, LoadOptions{.online = online});
  auto gpu_model = load_model(dir, *gpu, LoadOptions{.online = online});
  if (gpu_format) *gpu_format = weight_format_name(*gpu_model, online);
  GateKl sum;
  for (const auto& ids : prompts) {
    Tensor ref = teacher_forced_logits(*cpu_model, cpu, ids);
    Tensor ours = teacher_forced_logits(*gpu_model, *gpu, ids);
    Tensor rounded = teacher_forced_logits(*bf16_model, cpu_bf16, ids);
    EXPECT_EQ(ref.numel(), ours.numel());
    sum.cuda += mean_kl(ref, ours);
    sum.yardstick += mean_kl(ref, rounded);
  }
  const double n = double(prompts.size());
  return {sum.cuda / n, sum.yardstick / n};
}

void expect_within_gate(const GateKl& kl, const std::string& what) {
  std::printf("%s: mean KL(cpu fp8 || cuda fp8) %.2e, bf16-input yardstick %.2e (ratio %.2f)\n",
              what.c_str(), kl.cuda, kl.yardstick, kl.cuda / std::max(kl.yardstick, 1e-30));
  EXPECT_LE(kl.cuda, 1.25 * kl.yardstick) << what;
  // The absolute bound holds the yardstick itself in check. Quantizing the tiny MoE
  // oracles' experts at load moves their bf16-input yardstick to 2.5-3.0e-2 (an H100,
  // bench/RESULTS.md 2026-12-06 fifth session): there the bound is 4e-2.
  EXPECT_LE(kl.cuda, kl.yardstick > 1e-2 ? 4e-2 : 1e-2) << what;
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
    expect_within_gate(gate_kl(e.path(), prompts, std::nullopt), e.path().filename().string());
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
    expect_within_gate(gate_kl(oracle_dir(arch), prompts, online_quantization("fp8")),
                       std::string(arch) + " --quantization fp8");
  }
}

// FP8 MoE experts (the mixtral and qwen3_moe oracles with their experts written in each FP8
// layout, fp8_moe_fixture.h; the dense projections stay 16-bit). Here the CUDA path also
// runs its 16-bit parts in bf16 where the twin runs f32, which the FP8 yardstick does not
// see, so the gate adds what the same model costs with 16-bit experts (its own KL between
// the backends) to the yardstick. Last, the 16-bit oracle quantized at load
// (--quantization fp8: the experts per channel, and every dense projection too).
TEST(CudaFp8Gate, MoeExpertsAgreeWithTheCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  using fp8_moe::Layout;
  for (const char* arch : {"mixtral", "qwen3_moe"}) {
    std::vector<std::vector<int32_t>> prompts;
    for (auto& p : load_oracle(arch)) {
      prompts.push_back(p.prompt);
      prompts.back().insert(prompts.back().end(), p.greedy.begin(), p.greedy.end());
    }
    const GateKl bf16 = gate_kl(oracle_dir(arch), prompts, std::nullopt);
    std::printf("%s, 16-bit experts: mean KL(cpu || cuda) %.2e\n", arch, bf16.cuda);
    const auto tmp = std::filesystem::temp_directory_path() /
                     ("tandem-cuda-fp8-moe-" + std::string(arch) + "-" + std::to_string(::getpid()));
    for (auto [layout, name] : {std::pair{Layout::PerTensor, "per-tensor"},
                                {Layout::PerTensorStatic, "per-tensor, static inputs"},
                                {Layout::ChannelOfTensor, "per-channel"},
                                {Layout::Block, "[16, 32] blocks"},
                                {Layout::BlockOfRow, "[1, 4096] blocks"}}) {
      const auto dir = fp8_moe::write_fp8_moe(oracle_dir(arch), tmp / std::to_string(int(layout)), layout);
      GateKl kl = gate_kl(dir, prompts, std::nullopt);
      kl.yardstick += bf16.cuda;
      expect_within_gate(kl, std::string(arch) + " FP8 experts, " + name);
    }
    std::filesystem::remove_all(tmp);
    std::string format;
    GateKl online = gate_kl(oracle_dir(arch), prompts, online_quantization("fp8"), &format);
    EXPECT_TRUE(format.ends_with("; MoE experts fp8_e4m3")) << format;
    online.yardstick += bf16.cuda;
    expect_within_gate(online, std::string(arch) + " --quantization fp8, experts too");
  }
}

// Gemma 4's stacked experts quantized at load (per channel, down after its per_expert_scale
// fold: Gemma4Model::load_moe), gated as the Mixtral / Qwen3-MoE online runs above.
TEST(CudaFp8Gate, Gemma4OnlineExpertsAgreeWithTheCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  std::vector<std::vector<int32_t>> prompts;
  for (auto& p : load_oracle("gemma4_moe")) {
    prompts.push_back(p.prompt);
    prompts.back().insert(prompts.back().end(), p.greedy.begin(), p.greedy.end());
  }
  const GateKl bf16 = gate_kl(oracle_dir("gemma4_moe"), prompts, std::nullopt);
  std::string format;
  GateKl online = gate_kl(oracle_dir("gemma4_moe"), prompts, online_quantization("fp8"), &format);
  EXPECT_TRUE(format.ends_with("; MoE experts fp8_e4m3")) << format;
  online.yardstick += bf16.cuda;
  expect_within_gate(online, "gemma4_moe --quantization fp8, experts too");
}

}  // namespace cuda_fp8_gate_test
}  // namespace tandem::test
