// MiniCPM by construction (transformers has no class for it): over the llama oracle's
// weights, a MiniCPM config whose μP scalings are all neutral must reproduce the llama
// oracle, and each scaling must equal the same change made to the weights instead.
// Scales are powers of two, so both sides round identically.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/teacher_forcing.h"
#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace minicpm_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

json llama_config() {
  std::ifstream in(oracle_dir("llama") / "config.json");
  return json::parse(in);
}

// A model folder: `config` plus the llama oracle's weights with `scale(name)` applied.
fs::path write_model(const std::string& name, const json& config,
                     float (*scale)(const std::string&)) {
  fs::path dir = fs::path(TANDEM_BUILD_DIR) / "minicpm_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  auto file = SafetensorsFile::open(oracle_dir("llama") / "model.safetensors");
  SafetensorsWriter writer;
  for (const std::string& n : file->names()) {
    Tensor src = file->tensor(n);
    Tensor t = Tensor::empty_host(DType::F32, src.shape);
    convert_to_f32(src.data, src.dtype, t.ptr<float>(), size_t(src.numel()));
    for (int64_t i = 0; i < t.numel(); i++) t.ptr<float>()[i] *= scale(n);
    writer.add(n, t);
  }
  writer.write(dir / "model.safetensors");
  return dir;
}

Tensor logits_of(const fs::path& dir, const std::vector<int32_t>& ids) {
  auto backend = make_cpu_backend();
  auto model = load_model(dir, *backend);
  return teacher_forced_logits(*model, *backend, ids);
}

json minicpm(double scale_emb, double scale_depth, double dim_model_base) {
  json c = llama_config();
  c["model_type"] = "minicpm";
  c["scale_emb"] = scale_emb;
  c["scale_depth"] = scale_depth;
  c["dim_model_base"] = dim_model_base;
  return c;
}

float unscaled(const std::string&) { return 1.f; }
float embed_times_2(const std::string& n) { return n == "model.embed_tokens.weight" ? 2.f : 1.f; }
float outputs_halved(const std::string& n) {
  return n.ends_with("o_proj.weight") || n.ends_with("down_proj.weight") ? 0.5f : 1.f;
}

class MiniCpm : public ::testing::Test {
 protected:
  void SetUp() override {
    prompt_ = load_oracle("llama")[0];
    ids_ = prompt_.prompt;
    ids_.insert(ids_.end(), prompt_.greedy.begin(), prompt_.greedy.end());
    L_ = llama_config()["num_hidden_layers"].get<int>();
    D_ = llama_config()["hidden_size"].get<int>();
  }
  void expect_equal(const Tensor& a, const Tensor& b, double tol) {
    ASSERT_EQ(a.shape, b.shape);
    EXPECT_LE(relative_error(a.ptr<float>(), b.ptr<float>(), size_t(a.numel())), tol);
  }
  OraclePrompt prompt_;
  std::vector<int32_t> ids_;
  int L_ = 0, D_ = 0;
};

TEST_F(MiniCpm, NeutralScalingsReproduceTheLlamaOracle) {
  Tensor ours = logits_of(write_model("neutral", minicpm(1, std::sqrt(double(L_)), D_), unscaled), ids_);
  expect_equal(ours, prompt_.logits, 1e-4);
  expect_equal(ours, logits_of(oracle_dir("llama"), ids_), 1e-7);
}

TEST_F(MiniCpm, ScaleEmbMultipliesTheEmbeddings) {
  Tensor a = logits_of(write_model("emb", minicpm(2, std::sqrt(double(L_)), D_), unscaled), ids_);
  json llama = llama_config();
  Tensor b = logits_of(write_model("emb_ref", llama, embed_times_2), ids_);
  expect_equal(a, b, 1e-6);
}

TEST_F(MiniCpm, ScaleDepthScalesEveryBlockOutput) {
  // residual multiplier = scale_depth / √L = 0.5
  Tensor a = logits_of(write_model("depth", minicpm(1, 0.5 * std::sqrt(double(L_)), D_), unscaled), ids_);
  Tensor b = logits_of(write_model("depth_ref", llama_config(), outputs_halved), ids_);
  expect_equal(a, b, 1e-6);
}

TEST_F(MiniCpm, DimModelBaseDividesTheLogits) {
  // divisor = hidden_size / dim_model_base = 2, and the LM head is linear
  Tensor a = logits_of(write_model("base", minicpm(1, std::sqrt(double(L_)), D_ / 2), unscaled), ids_);
  Tensor b = logits_of(oracle_dir("llama"), ids_);
  for (int64_t i = 0; i < b.numel(); i++) b.ptr<float>()[i] /= 2;
  expect_equal(a, b, 1e-6);
}

TEST_F(MiniCpm, RejectsANonPositiveScale) {
  fs::path dir = write_model("bad", minicpm(0, 1, D_), unscaled);
  auto backend = make_cpu_backend();
  EXPECT_THROW(load_model(dir, *backend), Error);
}

}  // namespace minicpm_test
}  // namespace tandem::test
