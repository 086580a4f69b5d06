// Gemma3nModel against the naive double reference (gemma3n_reference.h) on a random
// model that reaches what the oracle fixture cannot: non-zero correct_output_scale (so
// per-layer inputs count), 3 streams with active index 1, ids past the per-layer
// vocabulary, q/k/v/o biases, an untied head, per-layer MLP widths, two sparsity
// levels, KV sharing read through the paged cache across steps, and a window of 3.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "gemma3n_reference.h"
#include "loader/safetensors_writer.h"
#include "model/model.h"

namespace tandem::test {
namespace gemma3n_model_test {

namespace fs = std::filesystem;

RefConfig test_config() {
  RefConfig c{};
  c.V = 40, c.Vp = 32, c.D = 16, c.L = 4, c.Hq = 4, c.Hkv = 2, c.Dh = 8, c.P = 4;
  c.N = 3, c.active = 1, c.rank = 3, c.window = 3;
  c.ffn = {24, 16, 20, 24};
  c.sliding = {true, false, true, false};
  c.kv_source = {-1, -1, 0, 1};  // 2 shared layers
  c.sparse = {true, false, true, false};
  c.std_mult = {1.2815515655446004, 0, 0, 0};  // Φ⁻¹(0.9) on layer 0, Φ⁻¹(0.5) = 0 on 2
  c.theta_full = 10000, c.theta_sliding = 100, c.softcap = 5, c.eps = 1e-6;
  return c;
}

nlohmann::json config_json(const RefConfig& c) {
  return {{"model_type", "gemma3n_text"},
          {"vocab_size", c.V},
          {"vocab_size_per_layer_input", c.Vp},
          {"hidden_size", c.D},
          {"hidden_size_per_layer_input", c.P},
          {"num_hidden_layers", c.L},
          {"num_attention_heads", c.Hq},
          {"num_key_value_heads", c.Hkv},
          {"head_dim", c.Dh},
          {"intermediate_size", c.ffn},
          {"altup_num_inputs", c.N},
          {"altup_active_idx", c.active},
          {"altup_correct_scale", true},
          {"laurel_rank", c.rank},
          {"num_kv_shared_layers", 2},
          {"activation_sparsity_pattern", {0.9, 0.0, 0.5, 0.0}},
          {"sliding_window", c.window},
          {"layer_types",
           {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}},
          {"rope_parameters",
           {{"full_attention", {{"rope_type", "default"}, {"rope_theta", c.theta_full}}},
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", c.theta_sliding}}}}},
          {"final_logit_softcapping", c.softcap},
          {"rms_norm_eps", c.eps},
          {"attention_bias", true},
          {"tie_word_embeddings", false},
          {"hidden_activation", "gelu_pytorch_tanh"}};
}

using Shapes = std::map<std::string, std::vector<int64_t>>;

// Every tensor of the checkpoint, random: matrices U(±√(3/fan_in)), norms and scales
// U(0.5, 1.5), biases U(±0.1), embeddings U(±1).
RefWeights random_weights(const RefConfig& c, uint32_t seed, Shapes& shapes) {
  std::mt19937 rng(seed);
  RefWeights w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    auto& v = w.w[name];
    v.resize(size_t(shape.size() == 1 ? shape[0] : shape[0] * shape[1]));
    for (float& x : v) x = u(rng);
    shapes[name] = std::move(shape);
  };
  auto matrix = [&](const std::string& name, int rows, int cols) {
    float a = std::sqrt(3.f / float(cols));
    add(name, {rows, cols}, -a, a);
  };
  auto vec = [&](const std::string& name, int n) { add(name, {n}, 0.5f, 1.5f); };
  auto bias = [&](const std::string& name, int n) { add(name, {n}, -0.1f, 0.1f); };
  const int QD = c.Hq * c.Dh, KD = c.Hkv * c.Dh;
  add("model.embed_tokens.weight", {c.V, c.D}, -1, 1);
  add("model.embed_tokens_per_layer.weight", {c.Vp, c.L * c.P}, -1, 1);
  matrix("model.per_layer_model_projection.weight", c.L * c.P, c.D);
  vec("model.per_layer_projection_norm.weight", c.P);
  for (int n = 0; n + 1 < c.N; n++) {
    matrix("model.altup_projections." + std::to_string(n) + ".weight", c.D, c.D);
    matrix("model.altup_unembed_projections." + std::to_string(n) + ".weight", c.D, c.D);
  }
  vec("model.norm.weight", c.D);
  matrix("lm_head.weight", c.V, c.D);
  for (int i = 0; i < c.L; i++) {
    const std::string L = "model.layers." + std::to_string(i) + ".", A = L + "self_attn.";
    matrix(A + "q_proj.weight", QD, c.D);
    bias(A + "q_proj.bias", QD);
    vec(A + "q_norm.weight", c.Dh);
    if (c.kv_source[i] < 0) {
      matrix(A + "k_proj.weight", KD, c.D);
      matrix(A + "v_proj.weight", KD, c.D);
      bias(A + "k_proj.bias", KD);
      bias(A + "v_proj.bias", KD);
      vec(A + "k_norm.weight", c.Dh);
    }
    matrix(A + "o_proj.weight", c.D, QD);
    bias(A + "o_proj.bias", c.D);
    for (const char* n :
         {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
          "post_feedforward_layernorm", "post_per_layer_input_norm", "altup.router_norm",
          "laurel.post_laurel_norm"})
      vec(L + n + ".weight", c.D);
    const int F = c.ffn[i];
    matrix(L + "mlp.gate_proj.weight", F, c.D);
    matrix(L + "mlp.up_proj.weight", F, c.D);
    matrix(L + "mlp.down_proj.weight", c.D, F);
    vec(L + "altup.correct_output_scale", c.D);
    add(L + "altup.correction_coefs.weight", {c.N, c.N}, -0.5f, 0.5f);
    add(L + "altup.prediction_coefs.weight", {c.N * c.N, c.N}, -0.5f, 0.5f);
    matrix(L + "altup.modality_router.weight", c.N, c.D);
    matrix(L + "laurel.linear_left.weight", c.rank, c.D);
    matrix(L + "laurel.linear_right.weight", c.D, c.rank);
    matrix(L + "per_layer_input_gate.weight", c.P, c.D);
    matrix(L + "per_layer_projection.weight", c.D, c.P);
  }
  return w;
}

// One row of a step: `count` tokens from position `start`, block table `blocks`.
struct StepRow {
  std::vector<int> tokens;  // the row's whole sequence
  int start, count;
  std::vector<int32_t> blocks;
};

Tensor upload_i32(Backend& be, const std::vector<int32_t>& v, Shape shape) {
  Tensor host = Tensor::empty_host(DType::I32, shape);
  std::copy(v.begin(), v.end(), host.ptr<int32_t>());
  return be.upload(host, DType::I32);
}

// The step the scheduler would plan for these rows, sampling every token.
StepTensors make_step(Backend& be, const std::vector<StepRow>& rows, int block_size) {
  std::vector<int32_t> tokens, positions, slots, starts{0}, lens, table;
  size_t max_blocks = 0;
  for (auto& r : rows) max_blocks = std::max(max_blocks, r.blocks.size());
  for (auto& r : rows) {
    for (int p = r.start; p < r.start + r.count; p++) {
      tokens.push_back(r.tokens[p]);
      positions.push_back(p);
      slots.push_back(r.blocks[p / block_size] * block_size + p % block_size);
    }
    starts.push_back(int32_t(tokens.size()));
    lens.push_back(r.start + r.count);
    std::vector<int32_t> padded = r.blocks;
    padded.resize(max_blocks, 0);
    table.insert(table.end(), padded.begin(), padded.end());
  }
  const int64_t T = int64_t(tokens.size()), B = int64_t(rows.size());
  std::vector<int32_t> all(tokens.size());
  std::iota(all.begin(), all.end(), 0);
  StepTensors s;
  s.tokens = upload_i32(be, tokens, {T});
  s.positions = upload_i32(be, positions, {T});
  s.seq_starts = upload_i32(be, starts, {B + 1});
  s.context_lens = upload_i32(be, lens, {B});
  s.groups = {{upload_i32(be, slots, {T}), upload_i32(be, table, {B, int64_t(max_blocks)}),
               int(max_blocks)}};
  s.sample_index = upload_i32(be, all, {T});
  s.num_tokens = int(T);
  s.num_rows = int(B);
  s.max_context_len = *std::max_element(lens.begin(), lens.end());
  s.block_size = block_size;
  return s;
}

// ‖a − b‖ / ‖b‖ of logits rows [first, first + a.rows()) of the reference.
double rel_err(Backend& be, const Tensor& got, const std::vector<Vec>& want, int first) {
  Tensor h = be.to_host_f32(got);
  double num = 0, den = 0;
  for (int64_t r = 0; r < h.rows(); r++)
    for (int64_t v = 0; v < h.cols(); v++) {
      double b = want[first + r][v], d = h.ptr<float>()[r * h.cols() + v] - b;
      num += d * d;
      den += b * b;
    }
  return std::sqrt(num / den);
}

class Gemma3nModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_gemma3n_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    weights_ = random_weights(config_, 7, shapes_);
    std::ofstream(dir_ / "config.json") << config_json(config_).dump(1);
    SafetensorsWriter writer;
    for (auto& [name, values] : weights_.w) {
      const auto& d = shapes_.at(name);
      Tensor t = Tensor::empty_host(DType::F32, d.size() == 1 ? Shape{d[0]} : Shape{d[0], d[1]});
      std::copy(values.begin(), values.end(), t.ptr<float>());
      writer.add(name, t);
    }
    writer.write(dir_ / "model.safetensors");
    model_ = load_model(dir_, *backend_);
    for (auto& spec : model_->kv_specs()) {
      PagedKv kv;
      if (!spec.shares_with) {
        Shape shape{kNumBlocks, kBlockSize, spec.num_kv_heads, spec.head_dim};
        kv.k = backend_->zeros(DType::F32, shape);
        kv.v = backend_->zeros(DType::F32, shape);
      }
      kv_.push_back(kv);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  static constexpr int kNumBlocks = 12, kBlockSize = 4;
  RefConfig config_ = test_config();
  Shapes shapes_;
  RefWeights weights_;
  fs::path dir_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend();
  std::unique_ptr<Model> model_;
  std::vector<PagedKv> kv_;
};

TEST_F(Gemma3nModelTest, SharingLayersReadTheirProducersCache) {
  auto specs = model_->kv_specs();
  ASSERT_EQ(specs.size(), 4u);
  std::vector<int> shares, windows;
  for (auto& s : specs) {
    shares.push_back(s.shares_with.value_or(-1));  // -1: its own, for the comparison
    windows.push_back(s.window);
    EXPECT_EQ(s.num_kv_heads, 2);
    EXPECT_EQ(s.head_dim, 8);
  }
  EXPECT_EQ(shares, (std::vector<int>{-1, -1, 0, 1}));
  EXPECT_EQ(windows, (std::vector<int>{3, 0, 3, 0}));
}

// Prefill of 7 tokens, then 3 more through the cache (the window of 3 spans the two
// steps); ids 33, 35 and 39 lie past the per-layer vocabulary of 32.
TEST_F(Gemma3nModelTest, MatchesTheNaiveReferenceAcrossSteps) {
  const std::vector<int> tokens = {5, 33, 12, 39, 0, 7, 31, 35, 20, 2};
  auto want = Gemma3nReference(config_, weights_).forward(tokens);
  const std::vector<int32_t> blocks = {2, 0, 3};
  Tensor first = model_->forward(make_step(*backend_, {{tokens, 0, 7, blocks}}, kBlockSize), kv_);
  EXPECT_LE(rel_err(*backend_, first, want, 0), 1e-5);
  Tensor second = model_->forward(make_step(*backend_, {{tokens, 7, 3, blocks}}, kBlockSize), kv_);
  EXPECT_LE(rel_err(*backend_, second, want, 7), 1e-5);
}

// Two rows in one step, each equal to its own reference: nothing leaks across rows.
TEST_F(Gemma3nModelTest, RowsOfOneStepAreIndependent) {
  const std::vector<int> a = {1, 2, 3, 34, 5, 6}, b = {9, 38, 7};
  auto want_a = Gemma3nReference(config_, weights_).forward(a);
  auto want_b = Gemma3nReference(config_, weights_).forward(b);
  Tensor got =
      model_->forward(make_step(*backend_, {{a, 0, 6, {4, 1}}, {b, 0, 3, {7}}}, kBlockSize), kv_);
  std::vector<Vec> want = want_a;
  want.insert(want.end(), want_b.begin(), want_b.end());
  EXPECT_LE(rel_err(*backend_, got, want, 0), 1e-5);
}

}  // namespace gemma3n_model_test
}  // namespace tandem::test
