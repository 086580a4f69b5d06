// `tandem quantize` and online quantization (--quantization fp8) agree byte for byte: the
// written checkpoint loads to the same logits as the 16-bit one quantized at load, carries
// llm-compressor's quantization_config, and its FP8 weights are within one e4m3 step of
// the originals; random-model --dtype fp8 writes a folder tandem loads as FP8, and writes
// MoE experts. Quantized folders whose scales are missing, misshapen or not finite are
// refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "engine/teacher_forcing.h"
#include "loader/checkpoint.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors_writer.h"
#include "model/model.h"

namespace tandem::cli {
namespace fp8_quantize_test {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tandem_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(Fp8Quantize, WritesWhatOnlineQuantizationComputes) {
  const fs::path src = fs::path(TANDEM_TEST_DATA) / "oracle" / "llama", out = scratch("quantize");
  ASSERT_EQ(run_quantize({.model = src.string(), .out = out.string()}), 0);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(out / "config.json"));
  const auto& q = config["quantization_config"];
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["strategy"], "channel");
  EXPECT_EQ(q["config_groups"]["group_0"]["input_activations"]["strategy"], "token");
  EXPECT_EQ(q["ignore"], nlohmann::json::array({"lm_head"}));

  const Checkpoint original = Checkpoint::open(src), written = Checkpoint::open(out);
  const std::string w = "model.layers.0.self_attn.q_proj.weight";
  const Tensor q8 = written.get(w), s = written.get("model.layers.0.self_attn.q_proj.weight_scale");
  ASSERT_EQ(q8.dtype, DType::F8E4M3);
  ASSERT_EQ(s.dtype, DType::BF16);
  ASSERT_EQ(s.numel(), q8.rows());
  const Tensor orig = original.get(w);
  std::vector<float> o(size_t(orig.numel()));
  convert_to_f32(orig.data, orig.dtype, o.data(), o.size());
  for (int64_t r = 0; r < q8.rows(); r++) {
    const float scale = bf16_to_f32(s.ptr<uint16_t>()[r]);
    for (int64_t k = 0; k < q8.cols(); k++) {
      const float back = f8e4m3_to_f32(q8.ptr<uint8_t>()[r * q8.cols() + k]) * scale;
      ASSERT_LE(std::fabs(back - o[size_t(r * q8.cols() + k)]), 32.f * scale) << r << "," << k;
    }
  }
  EXPECT_EQ(written.get("lm_head.weight").dtype, original.get("lm_head.weight").dtype);

  auto backend = make_cpu_backend();
  auto from_file = load_model(out, *backend);
  auto online = load_model(src, *backend, LoadOptions{.online = online_quantization("fp8")});
  auto plain = load_model(src, *backend);
  const std::vector<int32_t> ids = {1, 5, 9, 33, 100, 200, 7, 8};
  const Tensor a = teacher_forced_logits(*from_file, *backend, ids);
  const Tensor b = teacher_forced_logits(*online, *backend, ids);
  const Tensor c = teacher_forced_logits(*plain, *backend, ids);
  double diff = 0, moved = 0;
  for (int64_t i = 0; i < a.numel(); i++) {
    diff = std::max(diff, double(std::fabs(a.ptr<float>()[i] - b.ptr<float>()[i])));
    moved = std::max(moved, double(std::fabs(a.ptr<float>()[i] - c.ptr<float>()[i])));
  }
  EXPECT_EQ(diff, 0.0);
  EXPECT_GT(moved, 0.0);  // the FP8 model is not the 16-bit one
  EXPECT_NE(weight_format_name(from_file->config(), std::nullopt).find("fp8_e4m3 per-channel"),
            std::string::npos);
  EXPECT_EQ(weight_format_name(plain->config(), std::nullopt), "bf16");
  fs::remove_all(out);
}

TEST(Fp8Quantize, RandomModelWritesAnFp8Checkpoint) {
  const fs::path out = scratch("random_fp8");
  RandomModelOptions o;
  o.like = "llama-100m";
  o.out = out.string();
  o.dtype = "fp8";
  ASSERT_EQ(run_random_model(o), 0);
  const Checkpoint ck = Checkpoint::open(out);
  EXPECT_EQ(ck.get("model.layers.3.mlp.down_proj.weight").dtype, DType::F8E4M3);
  EXPECT_EQ(ck.get("model.embed_tokens.weight").dtype, DType::BF16);
  LoadedModel m = load_model_folder(out, "cpu");
  EXPECT_NE(m.weight_format.find("compressed-tensors"), std::string::npos);
  const Tensor logits = teacher_forced_logits(*m.model, *m.backend, std::vector<int32_t>{1, 2, 3});
  for (int64_t i = 0; i < logits.numel(); i++) ASSERT_TRUE(std::isfinite(logits.ptr<float>()[i]));
  fs::remove_all(out);
}

// random-model writes Mixtral's and Qwen3-MoE's experts (the oracles' tiny configs), so the
// GPU benches can time the real shapes; --quantization fp8 quantizes them at load.
TEST(Fp8Quantize, RandomModelWritesMoeExperts) {
  for (auto [arch, expert] : {std::pair{"mixtral", "block_sparse_moe.experts.7.w2.weight"},
                              {"qwen3_moe", "mlp.experts.7.down_proj.weight"}}) {
    SCOPED_TRACE(arch);
    const fs::path out = scratch(std::string("random_moe_") + arch);
    const fs::path config = fs::path(TANDEM_TEST_DATA) / "oracle" / arch / "config.json";
    ASSERT_EQ(run_random_model({.config = config.string(), .out = out.string()}), 0);
    const nlohmann::json c = nlohmann::json::parse(std::ifstream(config));
    const int64_t D = c["hidden_size"],
                  F = c.value("moe_intermediate_size", c["intermediate_size"]);
    const Checkpoint ck = Checkpoint::open(out);
    const std::string name = "model.layers.3." + std::string(expert);
    ASSERT_TRUE(ck.has(name)) << name;
    EXPECT_EQ(ck.get(name).shape, (Shape{D, F}));
    EXPECT_FALSE(ck.has("model.layers.3.mlp.down_proj.weight")) << "a MoE layer has no dense MLP";
    LoadedModel m = load_model_folder(out, "cpu", {.online = online_quantization("fp8")});
    EXPECT_TRUE(m.weight_format.ends_with("; MoE experts fp8_e4m3")) << m.weight_format;
    const Tensor logits =
        teacher_forced_logits(*m.model, *m.backend, std::vector<int32_t>{1, 2, 3});
    for (int64_t i = 0; i < logits.numel(); i++) ASSERT_TRUE(std::isfinite(logits.ptr<float>()[i]));
    fs::remove_all(out);
  }
}

TEST(Fp8Quantize, RefusesAnAlreadyQuantizedCheckpoint) {
  const fs::path src = fs::path(TANDEM_TEST_DATA) / "oracle" / "fp8" / "llama_block";
  EXPECT_EQ(run_quantize({.model = src.string(), .out = scratch("requant").string()}), 1);
}

// A copy of the folder `src` at `dst` with `edit` applied to each tensor (false: dropped).
void rewrite(const fs::path& src, const fs::path& dst,
             const std::function<bool(const std::string&, Tensor&)>& edit) {
  fs::create_directories(dst);
  for (const auto& f : fs::directory_iterator(src))
    if (f.path().extension() != ".safetensors") fs::copy_file(f.path(), dst / f.path().filename());
  const Checkpoint ck = Checkpoint::open(src);
  SafetensorsWriter w;
  for (const std::string& name : ck.names()) {
    const Tensor stored = ck.get(name);
    Tensor t = Tensor::empty_host(stored.dtype, stored.shape);
    std::memcpy(t.data, stored.data, size_t(stored.nbytes()));
    if (edit(name, t)) w.add(name, t);
  }
  w.write(dst / "model.safetensors");
}

// The error loading `dir` on the CPU ("" when it loads).
std::string load_error(const fs::path& dir) {
  try {
    load_model_folder(dir, "cpu");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Fp8Quantize, ScalesMissingMisshapenOrNotFiniteAreRefusedByName) {
  const fs::path root = scratch("broken_scales");
  for (const char* arch : {"llama", "gemma4_moe"}) {
    const fs::path good = root / arch;
    ASSERT_EQ(run_quantize({.model = (fs::path(TANDEM_TEST_DATA) / "oracle" / arch).string(),
                            .out = good.string()}),
              0);
    ASSERT_EQ(load_error(good), "") << arch;
    // The layer-0 scale of one quantized weight: a dense projection's, or a stacked expert's.
    const std::string scale = std::string(arch) == "llama"
                                  ? "model.layers.0.self_attn.q_proj.weight_scale"
                                  : stacked_scale_name("model.layers.0.experts.down_proj");
    ASSERT_NO_THROW(Checkpoint::open(good).get(scale)) << scale;
    const uint16_t nan = 0x7fc0, inf = 0x7f80, negative = 0xbf80;  // bf16 NaN, +inf, -1
    for (uint16_t bad : {nan, inf, negative}) {
      const fs::path dir = root / (std::string(arch) + "_" + std::to_string(bad));
      rewrite(good, dir, [&](const std::string& name, Tensor& t) {
        if (name == scale) t.ptr<uint16_t>()[1] = bad;
        return true;
      });
      const std::string error = load_error(dir);
      EXPECT_NE(error.find(scale), std::string::npos) << error;
      EXPECT_NE(error.find("at index 1"), std::string::npos) << error;
    }
    const fs::path missing = root / (std::string(arch) + "_missing");
    rewrite(good, missing, [&](const std::string& name, Tensor&) { return name != scale; });
    EXPECT_NE(load_error(missing).find(scale), std::string::npos) << load_error(missing);
    const fs::path misshapen = root / (std::string(arch) + "_misshapen");
    rewrite(good, misshapen, [&](const std::string& name, Tensor& t) {
      if (name != scale) return true;
      t = Tensor::empty_host(t.dtype, {t.numel() / 2});  // half the scales it needs
      std::memset(t.data, 0, size_t(t.nbytes()));
      return true;
    });
    EXPECT_NE(load_error(misshapen).find(scale), std::string::npos) << load_error(misshapen);
  }
  fs::remove_all(root);
}

}  // namespace fp8_quantize_test
}  // namespace tandem::cli
