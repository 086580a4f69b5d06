// FP8 MoE experts on the CPU backend, through the loader, on the two MoE oracle models
// (mixtral, qwen3_moe). Their experts are quantized here into checkpoint folders of each
// layout (the dense projections stay 16-bit, so only the experts change), and:
//   - layouts that declare the same arithmetic give the same logits (up to f32 rounding
//     where they take different paths): per-tensor scales
//     ("fp8", one scale per gate / up / down tensor, fused into per-channel vectors by the
//     loader), the same bytes with those scales written per channel (compressed-tensors),
//     and as [1, ≥K] blocks ("fp8" weight_block_size);
//   - renumbering the experts (their tensors and the router's rows) gives the same logits
//     up to summation order, so each expert's scales travel with its weights (expert 0's
//     scales for all moves the logits by ~0.4);
//   - every layout stays within W8A8 noise of the 16-bit oracle (0.14–0.22 on these tiny
//     random models; a dropped scale is off by orders of magnitude), real [16, 32] blocks
//     and static input scales included.
// The arithmetic itself is checked op by op against double (cpu_moe_test.cpp).
// Online quantization (--quantization fp8) and `tandem quantize` cover the experts too: the
// folder `tandem quantize` writes holds every expert projection in e4m3 and loads to the
// logits online quantization computes from the 16-bit folder.
// Gemma 4's stacked experts (Fp8MoeGemma4.*): per channel, down after the per_expert_scale
// fold (or, read back from `tandem quantize`'s e4m3, with it folded into down's scales), and
// each rank its own slice under -tp 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "cli/commands.h"
#include "cli/model_files.h"
#include "engine/teacher_forcing.h"
#include "engine/tp_ranks.h"
#include "fp8_moe_fixture.h"
#include "loader/checkpoint.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors_writer.h"
#include "model/arch/gemma4.h"
#include "model/model.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace fp8_moe_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using fp8_moe::Layout;
using fp8_moe::write_fp8_moe;

// `format`: where to put the loaded model's weight_format_name.
std::vector<Tensor> logits_of(const fs::path& dir, const std::vector<OraclePrompt>& prompts,
                              const LoadOptions& options = {}, std::string* format = nullptr) {
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend, options);
  if (format) *format = weight_format_name(*model, options.online);
  std::vector<Tensor> out;
  for (const OraclePrompt& p : prompts) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    out.push_back(teacher_forced_logits(*model, *backend, ids));
  }
  return out;
}

double worst_error(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].numel(), want[i].numel());
    worst = std::max(worst, relative_error(got[i].ptr<float>(), want[i].ptr<float>(),
                                           size_t(std::min(got[i].numel(), want[i].numel()))));
  }
  return worst;
}

class Fp8Moe : public testing::TestWithParam<std::string> {};

TEST_P(Fp8Moe, CpuExpertsLoadInEveryLayout) {
  const std::string arch = GetParam();
  const fs::path src = oracle_dir(arch);
  const fs::path tmp = fs::temp_directory_path() / ("tandem-fp8-moe-" + arch + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const std::vector<OraclePrompt> prompts = load_oracle(arch);
  ASSERT_FALSE(prompts.empty());
  std::vector<Tensor> oracle;
  for (const OraclePrompt& p : prompts) oracle.push_back(p.logits);

  const auto tensor = logits_of(write_fp8_moe(src, tmp / "tensor", Layout::PerTensor), prompts);
  const auto channel = logits_of(write_fp8_moe(src, tmp / "channel", Layout::ChannelOfTensor), prompts);
  const auto row_blocks = logits_of(write_fp8_moe(src, tmp / "row_blocks", Layout::BlockOfRow), prompts);
  const json config = json::parse(std::ifstream(src / "config.json"));
  const int E = config.value("num_local_experts", config.value("num_experts", 0));
  std::vector<int> perm(static_cast<size_t>(E));
  for (int e = 0; e < E; e++) perm[size_t(e)] = (e * 3 + 5) % E;  // E is a power of two
  const auto renumbered = logits_of(write_fp8_moe(src, tmp / "renumbered", Layout::ChannelOfTensor, perm), prompts);
  const auto blocks = logits_of(write_fp8_moe(src, tmp / "blocks", Layout::Block), prompts);
  const auto static_in = logits_of(write_fp8_moe(src, tmp / "static", Layout::PerTensorStatic), prompts);
  fs::remove_all(tmp);

  const double e_channel = worst_error(channel, tensor), e_rows = worst_error(row_blocks, tensor);
  const double e_perm = worst_error(renumbered, channel);
  std::printf("%s: per-channel vs per-tensor %.1e, [1, K] blocks vs per-tensor %.1e, renumbered %.1e\n",
              arch.c_str(), e_channel, e_rows, e_perm);
  EXPECT_LE(e_channel, 1e-6);
  // Block weights fold the scales into the factors (cpu_linear_fp8.cpp) and renumbered
  // experts are summed in another order: f32 roundings that may flip an e4m3 rounding of a
  // later layer's input, one e4m3 step (6-12%) of one element. How many flip depends on the
  // ISA's summation order: on AVX-512 the [1, K] blocks land within 1e-3 of per-tensor, on
  // an AVX2-only machine 3.1e-2 (mixtral) and 2.3e-3 (qwen3_moe). A misread scale or block
  // is off by far more (the layouts' logits against the oracle differ by 0.14-0.22).
  EXPECT_LE(e_rows, 5e-2);
  EXPECT_LE(e_perm, 1e-3);
  for (auto [name, got] : {std::pair{"per-tensor", &tensor}, {"[16, 32] blocks", &blocks},
                           {"static inputs", &static_in}}) {
    const double err = worst_error(*got, oracle);
    std::printf("%s: %s against the 16-bit oracle %.2e\n", arch.c_str(), name, err);
    EXPECT_LE(err, 0.3) << name;
    EXPECT_GT(err, 1e-5) << name << ": the experts are not quantized at all";
  }
}

TEST_P(Fp8Moe, OnlineQuantizationAndTandemQuantizeCoverTheExperts) {
  const std::string arch = GetParam();
  const fs::path tmp = fs::temp_directory_path() / ("tandem-fp8-moe-q-" + arch + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const std::vector<OraclePrompt> prompts = load_oracle(arch);
  ASSERT_EQ(cli::run_quantize({.model = oracle_dir(arch).string(), .out = tmp.string(), .gguf = std::nullopt}), 0);
  const Checkpoint written = Checkpoint::open(tmp);
  int experts = 0;
  for (const std::string& name : written.names())
    if (name.find(".experts.") != std::string::npos && name.size() > 7 &&
        name.compare(name.size() - 7, 7, ".weight") == 0) {
      EXPECT_EQ(written.get(name).dtype, DType::F8E4M3) << name;
      experts++;
    }
  EXPECT_GT(experts, 0);
  // The experts as loaded: online, each expert's rows quantized per channel and stacked as
  // an FP8 checkpoint's are (linear.h), byte for byte what the written folder reads back to.
  CpuBackend be;
  const bool mixtral = arch == "mixtral";
  const auto at_load =
      fp8_moe::load_layer_experts(oracle_dir(arch), mixtral, be, online_quantization("fp8"), 1);
  const auto read_back = fp8_moe::load_layer_experts(tmp, mixtral, be, std::nullopt, 1);
  for (auto [name, got, want] : {std::tuple{"gate_up", &at_load.gate_up, &read_back.gate_up},
                                 {"down", &at_load.down, &read_back.down}}) {
    ASSERT_TRUE(got->quant && want->quant) << name << " did not load as FP8";
    EXPECT_EQ(got->weight.dtype, DType::F8E4M3) << name;
    EXPECT_EQ(got->quant->granularity, ScaleGranularity::PerChannel) << name;
    EXPECT_EQ(got->quant->input, InputScaling::Dynamic) << name;
    const Shape scales{got->weight.dim(0), got->weight.dim(1)};  // [E, N]
    EXPECT_EQ(got->quant->weight_scale.shape, scales) << name;
    ASSERT_EQ(got->weight.shape, want->weight.shape) << name;
    ASSERT_EQ(want->quant->weight_scale.shape, scales) << name;
    EXPECT_EQ(std::memcmp(got->weight.data, want->weight.data, got->weight.nbytes()), 0) << name;
    const Tensor a = be.to_host_f32(got->quant->weight_scale),
                 b = be.to_host_f32(want->quant->weight_scale);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << name << "'s scales";
  }
  std::string read_format, online_format;
  const auto quantized = logits_of(tmp, prompts, {}, &read_format);
  fs::remove_all(tmp);
  const auto online = logits_of(oracle_dir(arch), prompts,
                                LoadOptions{.online = online_quantization("fp8")}, &online_format);
  for (const std::string& f : {read_format, online_format})
    EXPECT_TRUE(f.starts_with("fp8_e4m3 per-channel") && f.ends_with("; MoE experts fp8_e4m3"))
        << f;
  std::vector<Tensor> oracle;
  for (const OraclePrompt& p : prompts) oracle.push_back(p.logits);
  const double same = worst_error(online, quantized), off = worst_error(online, oracle);
  std::printf("%s: online fp8 (experts too) vs tandem quantize %.1e, vs the 16-bit oracle %.2e\n",
              arch.c_str(), same, off);
  EXPECT_LE(same, 1e-6);  // so online quantization quantized the experts as the folder holds them
  // Every linear in W8A8 (not the experts alone, as above): 0.36 / 0.39 on these tiny
  // random models; a dropped or misplaced scale is off by an order of magnitude or more.
  EXPECT_LE(off, 0.6);
  EXPECT_GT(off, 1e-5);
}

// A backend without FP8 experts (CpuBackend::set_fp8_experts(false) stands for one): online
// quantization still quantizes the dense projections and keeps the experts 16-bit, and says
// so in the weight format; an FP8 checkpoint's experts are refused there, by name.
TEST_P(Fp8Moe, OnlineQuantizationKeepsExpertsSixteenBitWhereTheBackendRunsNone) {
  const std::string arch = GetParam();
  CpuBackend be;
  be.set_fp8_experts(false);
  const auto online = online_quantization("fp8");
  const auto experts =
      fp8_moe::load_layer_experts(oracle_dir(arch), arch == "mixtral", be, online, 1);
  EXPECT_FALSE(experts.gate_up.quant.has_value());
  EXPECT_FALSE(experts.down.quant.has_value());
  EXPECT_NE(experts.gate_up.weight.dtype, DType::F8E4M3);
  auto model = load_model(oracle_dir(arch), be, {.online = online});
  const std::string format = weight_format_name(*model, online);
  EXPECT_TRUE(format.starts_with("fp8_e4m3 per-channel")) << format;
  const std::string kept = std::string("; MoE experts ") +
                           std::string(dtype_name(experts.gate_up.weight.dtype)) +
                           " (the cpu backend runs no FP8 MoE experts)";
  EXPECT_TRUE(format.ends_with(kept)) << format;
  // It runs: W8A8 dense projections, 16-bit experts, within the W8A8 noise above.
  const OraclePrompt p = load_oracle(arch).front();
  std::vector<int32_t> ids = p.prompt;
  ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
  const Tensor got = teacher_forced_logits(*model, be, ids);
  ASSERT_EQ(got.numel(), p.logits.numel());
  EXPECT_LE(relative_error(got.ptr<float>(), p.logits.ptr<float>(), size_t(got.numel())), 0.6);

  const fs::path tmp =
      fs::temp_directory_path() / ("tandem-fp8-moe-no-" + arch + "-" + std::to_string(::getpid()));
  const fs::path dir = write_fp8_moe(oracle_dir(arch), tmp, Layout::ChannelOfTensor);
  const std::string e = error_of([&] { load_model(dir, be); });
  fs::remove_all(tmp);
  for (const char* part :
       {"experts_gate_up", "holds FP8 MoE experts", "the cpu backend does not run"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
}

// Gemma 4's stacked 3-D experts (gate_up_proj [E, 2·Fe, D], down_proj [E, D, Fe] with the
// router's per_expert_scale folded in) under --quantization fp8: quantized per output
// channel into the stacked FP8 layout (linear.h), down after the fold, so each expert's
// rows dequantize to the checkpoint's (scaled) rows within an e4m3 step.
const arch::Gemma4Model& as_gemma4(const Model& m) {
  const auto* g = dynamic_cast<const arch::Gemma4Model*>(&m);
  if (!g) throw std::runtime_error("not a Gemma4Model");
  return *g;
}

// The relative error of FP8 experts `l` [E, N, K], dequantized, against `want` (host f32).
// On the CPU backend the weight's bytes and the f32 scales are host memory.
double dequantized_error(const Linear& l, const Tensor& want) {
  const int64_t rows = l.weight.dim(0) * l.weight.dim(1), K = l.weight.dim(2);
  std::vector<float> got(size_t(rows * K));
  convert_to_f32(l.weight.data, DType::F8E4M3, got.data(), got.size());
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < K; k++) got[size_t(r * K + k)] *= l.quant->weight_scale.ptr<float>()[r];
  return relative_error(got.data(), want.ptr<float>(), got.size());
}

Tensor checkpoint_f32(const Checkpoint& ck, const std::string& name) {
  const Tensor t = ck.get(name);
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  convert_to_f32(t.data, t.dtype, out.ptr<float>(), size_t(t.numel()));
  return out;
}

// gemma4_moe with per_expert_scale {0.5, 2, 1.5, 0.25} in every layer (the fixture's are
// all 1, which would hide a missing fold) at `dst`.
fs::path write_scaled_gemma4_moe(const fs::path& dst) {
  const fs::path src = oracle_dir("gemma4_moe");
  fs::create_directories(dst);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(src / f, dst / f, fs::copy_options::overwrite_existing);
  const Checkpoint ck = Checkpoint::open(src);
  SafetensorsWriter w;
  for (const std::string& name : ck.names()) {
    if (ck.file_of(name).path().filename() != "model.safetensors") continue;
    Tensor t = checkpoint_f32(ck, name);
    if (name.ends_with("router.per_expert_scale"))
      for (int64_t e = 0; e < t.numel(); e++)
        t.ptr<float>()[e] = std::array{0.5f, 2.f, 1.5f, 0.25f}[size_t(e % 4)];
    w.add(name, t);
  }
  w.write(dst / "model.safetensors");
  return dst;
}

TEST(Fp8MoeGemma4, OnlineQuantizationQuantizesTheStackedExpertsPerChannel) {
  const auto online = online_quantization("fp8");
  CpuBackend be;
  auto model = load_model(oracle_dir("gemma4_moe"), be, {.online = online});
  const std::string format = weight_format_name(*model, online);
  EXPECT_TRUE(format.starts_with("fp8_e4m3 per-channel") &&
              format.ends_with("; MoE experts fp8_e4m3"))
      << format;
  const fs::path dir = write_scaled_gemma4_moe(
      fs::temp_directory_path() / ("tandem-fp8-g4-scaled-" + std::to_string(::getpid())));
  CpuBackend scaled_be;
  auto scaled = load_model(dir, scaled_be, {.online = online});
  const Checkpoint ck = Checkpoint::open(dir);
  const json config = json::parse(std::ifstream(dir / "config.json"));
  const int64_t E = config["num_experts"], D = config["hidden_size"],
                Fe = config["moe_intermediate_size"];
  int moe_layers = 0;
  for (size_t i = 0; i < as_gemma4(*scaled).layers().size(); i++) {
    const arch::Gemma4Layer& l = as_gemma4(*scaled).layers()[i];
    if (!l.has_moe()) continue;
    moe_layers++;
    for (auto [name, x, shape] :
         {std::tuple{"gate_up", &l.moe.experts_gate_up, Shape{E, 2 * Fe, D}},
          {"down", &l.moe.experts_down, Shape{E, D, Fe}}}) {
      ASSERT_TRUE(x->quant.has_value()) << name << " of layer " << i << " is not FP8";
      EXPECT_EQ(x->weight.dtype, DType::F8E4M3) << name;
      EXPECT_EQ(x->weight.shape, shape) << name;
      EXPECT_EQ(x->quant->granularity, ScaleGranularity::PerChannel) << name;
      EXPECT_EQ(x->quant->input, InputScaling::Dynamic) << name;
      EXPECT_EQ(x->quant->weight_scale.shape, (Shape{shape[0], shape[1]})) << name;  // [E, N]
    }
    const std::string L = "model.layers." + std::to_string(i) + ".";
    Tensor down = checkpoint_f32(ck, L + "experts.down_proj");
    const Tensor scale = checkpoint_f32(ck, L + "router.per_expert_scale");
    const double unscaled = dequantized_error(l.moe.experts_down, down);
    for (int64_t e = 0; e < E; e++)
      for (int64_t j = 0; j < D * Fe; j++)
        down.ptr<float>()[e * D * Fe + j] *= scale.ptr<float>()[e];
    // e4m3 steps are 1/16..1/8 of a value: a dropped fold or a misplaced scale is far off.
    EXPECT_LE(
        dequantized_error(l.moe.experts_gate_up, checkpoint_f32(ck, L + "experts.gate_up_proj")),
        6e-2);
    EXPECT_LE(dequantized_error(l.moe.experts_down, down), 6e-2);
    EXPECT_GT(unscaled, 1e-1) << "per_expert_scale is not folded into down";
  }
  EXPECT_GT(moe_layers, 0);
  fs::remove_all(dir);
  // Every linear in W8A8, experts too, within the bar of the Mixtral / Qwen3-MoE online
  // tests; and the experts do change the logits against 16-bit experts.
  CpuBackend kept_be;
  kept_be.set_fp8_experts(false);
  auto kept = load_model(oracle_dir("gemma4_moe"), kept_be, {.online = online});
  double off = 0, moved = 0;
  for (const OraclePrompt& p : load_oracle("gemma4_moe")) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    const Tensor got = teacher_forced_logits(*model, be, ids);
    const Tensor dense_only = teacher_forced_logits(*kept, kept_be, ids);
    ASSERT_EQ(got.numel(), p.logits.numel());
    off =
        std::max(off, relative_error(got.ptr<float>(), p.logits.ptr<float>(), size_t(got.numel())));
    moved = std::max(
        moved, relative_error(got.ptr<float>(), dense_only.ptr<float>(), size_t(got.numel())));
  }
  std::printf(
      "gemma4_moe: online fp8 (experts too) vs the 16-bit oracle %.2e, vs 16-bit experts %.2e\n",
      off, moved);
  EXPECT_LE(off, 0.6);
  EXPECT_GT(off, 1e-5);
  EXPECT_GT(moved, 1e-5);
}

// Where they stay 16-bit the weight format says why: a backend without FP8 experts
// (CpuBackend::set_fp8_experts(false) stands for one); a dense Gemma 4 names no experts.
TEST(Fp8MoeGemma4, SixteenBitExpertsAreNamedWithTheReason) {
  const auto online = online_quantization("fp8");
  CpuBackend be;
  be.set_fp8_experts(false);
  auto moe = load_model(oracle_dir("gemma4_moe"), be, {.online = online});
  const Linear& gate_up = as_gemma4(*moe).layers()[0].moe.experts_gate_up;
  EXPECT_FALSE(gate_up.quant.has_value());
  const std::string kept =
      std::string("; MoE experts ") + std::string(dtype_name(gate_up.weight.dtype));
  const std::string format = weight_format_name(*moe, online);
  EXPECT_TRUE(format.starts_with("fp8_e4m3 per-channel")) << format;
  EXPECT_TRUE(format.ends_with(kept + " (the cpu backend runs no FP8 MoE experts)")) << format;
  CpuBackend cpu;
  auto dense = load_model(oracle_dir("gemma4"), cpu, {.online = online});
  EXPECT_EQ(weight_format_name(*dense, online).find("experts"), std::string::npos);
}

// `tandem quantize` writes the stacked experts in e4m3 with BF16 scales [E, N, 1] beside
// them (stacked_scale_name); the folder loads to the bytes and logits online quantization
// computes, on the scaled copy with per_expert_scale folded into down's scales (so within an
// e4m3 step of the folded weights), stays near itself at -tp 2, and a backend without FP8
// experts refuses it by name.
TEST(Fp8MoeGemma4, TandemQuantizeWritesTheStackedExpertsInFp8) {
  const fs::path tmp =
      fs::temp_directory_path() / ("tandem-fp8-g4-q-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  auto quantize = [](const fs::path& src, const fs::path& out) {
    return cli::run_quantize({.model = src.string(), .out = out.string(), .gguf = std::nullopt});
  };
  ASSERT_EQ(quantize(oracle_dir("gemma4_moe"), tmp / "plain"), 0);
  const Checkpoint written = Checkpoint::open(tmp / "plain");
  int stacked = 0;
  for (const std::string& name : written.names()) {
    if (!stacked_experts_name(name)) continue;
    const Tensor w = written.get(name), s = written.get(stacked_scale_name(name));
    EXPECT_EQ(w.dtype, DType::F8E4M3) << name;
    EXPECT_EQ(s.dtype, DType::BF16) << name;
    EXPECT_EQ(s.shape, (Shape{w.dim(0), w.dim(1), 1})) << name;
    stacked++;
  }
  EXPECT_GT(stacked, 0);
  const auto online = online_quantization("fp8");
  const std::vector<OraclePrompt> prompts = load_oracle("gemma4_moe");
  std::string read_format;
  const auto read_back = logits_of(tmp / "plain", prompts, {}, &read_format);
  const auto at_load = logits_of(oracle_dir("gemma4_moe"), prompts, {.online = online});
  EXPECT_TRUE(read_format.starts_with("fp8_e4m3 per-channel") &&
              read_format.ends_with("; MoE experts fp8_e4m3"))
      << read_format;
  const double same = worst_error(read_back, at_load);
  std::printf("gemma4_moe: tandem quantize vs online fp8 %.1e\n", same);
  EXPECT_LE(same, 1e-6);  // per_expert_scale is all ones here: the same bytes and scales

  const fs::path scaled = write_scaled_gemma4_moe(tmp / "scaled");
  ASSERT_EQ(quantize(scaled, tmp / "scaled_q"), 0);
  CpuBackend be;
  auto model = load_model(tmp / "scaled_q", be);
  const Checkpoint ck = Checkpoint::open(scaled);
  int moe_layers = 0;
  for (size_t i = 0; i < as_gemma4(*model).layers().size(); i++) {
    const arch::Gemma4Layer& l = as_gemma4(*model).layers()[i];
    if (!l.has_moe()) continue;
    moe_layers++;
    ASSERT_TRUE(l.moe.experts_down.quant.has_value());
    EXPECT_EQ(l.moe.experts_down.weight.dtype, DType::F8E4M3);
    const std::string L = "model.layers." + std::to_string(i) + ".";
    Tensor down = checkpoint_f32(ck, L + "experts.down_proj");
    const Tensor scale = checkpoint_f32(ck, L + "router.per_expert_scale");
    const int64_t E = down.dim(0), per_expert = down.numel() / E;
    for (int64_t e = 0; e < E; e++)
      for (int64_t j = 0; j < per_expert; j++)
        down.ptr<float>()[e * per_expert + j] *= scale.ptr<float>()[e];
    EXPECT_LE(dequantized_error(l.moe.experts_down, down), 6e-2) << "layer " << i;
  }
  EXPECT_GT(moe_layers, 0);
  const double scaled_gap = worst_error(logits_of(tmp / "scaled_q", prompts),
                                        logits_of(scaled, prompts, {.online = online}));
  std::printf("gemma4_moe scaled: tandem quantize vs online fp8 %.1e\n", scaled_gap);
  EXPECT_LE(scaled_gap, 5e-2);  // down rounds the 1.5-scaled expert's rows apart, no more

  // -tp 2: each rank cuts the e4m3 stacks and their scales (gate|up rows, down columns).
  cli::LoadedModel one = cli::load_model_folder(tmp / "plain", "cpu");
  cli::LoadedModel two = cli::load_model_folder(tmp / "plain", "cpu", {.tp = {.size = 2}});
  ASSERT_TRUE(two.tp_ranks);
  EXPECT_TRUE(two.weight_format.ends_with("; MoE experts fp8_e4m3")) << two.weight_format;
  const arch::Gemma4Layer& half = as_gemma4(*two.model).layers()[0];
  ASSERT_TRUE(half.moe.experts_down.quant.has_value());
  EXPECT_EQ(half.moe.experts_down.weight.dim(2) * 2,
            as_gemma4(*one.model).layers()[0].moe.experts_down.weight.dim(2));  // Fe / 2
  double tp_gap = 0;
  for (const OraclePrompt& p : prompts) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    const Tensor want = teacher_forced_logits(*one.model, *one.backend, ids);
    const Tensor got = teacher_forced_logits(*two.tp_ranks, ids, 5);
    ASSERT_EQ(got.numel(), want.numel());
    tp_gap =
        std::max(tp_gap, relative_error(got.ptr<float>(), want.ptr<float>(), size_t(want.numel())));
  }
  std::printf("gemma4_moe tandem quantize at -tp 2: %.2e from -tp 1\n", tp_gap);
  EXPECT_LE(tp_gap, 0.1);  // the same bytes; down's inputs are quantized per rank's slice

  CpuBackend none;
  none.set_fp8_experts(false);
  const std::string e = error_of([&] { load_model(tmp / "plain", none); });
  fs::remove_all(tmp);
  for (const char* part : {"experts.gate_up_proj", "holds FP8 MoE experts", "cpu backend"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
}

// -tp 2 under --quantization fp8: each rank quantizes its own slice of the experts (down's
// columns after the fold), within the bar the Mixtral / Qwen3-MoE online runs keep
// (TensorParallelFp8.WholeModelsStayNearOneRank).
TEST(Fp8MoeGemma4, OnlineTensorParallelStaysNearOneRank) {
  const fs::path dir = oracle_dir("gemma4_moe");
  const auto online = online_quantization("fp8");
  cli::LoadedModel one = cli::load_model_folder(dir, "cpu", {.online = online});
  cli::LoadedModel two = cli::load_model_folder(dir, "cpu", {.online = online, .tp = {.size = 2}});
  ASSERT_TRUE(two.tp_ranks);
  EXPECT_TRUE(two.weight_format.ends_with("; MoE experts fp8_e4m3")) << two.weight_format;
  const arch::Gemma4Layer& l = as_gemma4(*two.model).layers()[0];
  ASSERT_TRUE(l.moe.experts_down.quant.has_value());
  EXPECT_EQ(l.moe.experts_down.weight.dim(2) * 2,
            as_gemma4(*one.model).layers()[0].moe.experts_down.weight.dim(2));  // Fe / 2
  double worst = 0;
  for (const OraclePrompt& p : load_oracle("gemma4_moe")) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    const Tensor want = teacher_forced_logits(*one.model, *one.backend, ids);
    const Tensor got = teacher_forced_logits(*two.tp_ranks, ids, 5);
    ASSERT_EQ(got.numel(), want.numel());
    worst =
        std::max(worst, relative_error(got.ptr<float>(), want.ptr<float>(), size_t(want.numel())));
  }
  std::printf("gemma4_moe at -tp 2 (online fp8): %.2e from -tp 1\n", worst);
  EXPECT_LE(worst, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Oracle, Fp8Moe, testing::Values("mixtral", "qwen3_moe"));

}  // namespace fp8_moe_test
}  // namespace tandem::test
