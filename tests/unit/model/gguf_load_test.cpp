// GGUF → tandem model: the quantized oracle files through the checkpoint and the weight
// loader (block types kept as stored, rows un-permuted without decoding, a fused q|k|v whose
// pieces differ in type loaded as pieces), and every way a GGUF model's metadata or tensor
// names can be refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "loader/gguf_writer.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/gguf_translate.h"
#include "model/layers.h"
#include "model/model.h"

namespace tandem {
namespace gguf_load_test {

namespace fs = std::filesystem;

fs::path oracle_gguf(const std::string& name) {
  return fs::path(TANDEM_TEST_DATA) / "oracle" / "gguf" / name;
}

// A host-memory backend that keeps every weight as stored, ggml blocks included (what the
// CPU backend will do once it computes with them). Loading is all it does: its ops fail.
class BlockKeepingBackend final : public Backend {
 public:
  std::string name() const override { return "block-keeping"; }
  Device device() const override { return Device::CPU; }
  DType act_dtype() const override { return DType::F32; }
  DType weight_dtype(DType stored) const override { return stored; }
  Tensor alloc(DType dtype, Shape shape) override { return Tensor::empty_host(dtype, shape); }
  Tensor zeros(DType dtype, Shape shape) override { return Tensor::empty_host(dtype, shape); }
  Tensor upload(const Tensor& host, DType dtype) override {
    if (dtype != host.dtype) fail("block-keeping: upload converts nothing");
    Tensor out = Tensor::empty_host(dtype, host.shape);
    std::memcpy(out.data, host.data, host.nbytes());
    return out;
  }
#define TANDEM_NO_OP(sig) \
  sig override { fail("block-keeping: no ops"); }
  TANDEM_NO_OP(Tensor to_host_f32(const Tensor&))
  TANDEM_NO_OP(void write_i32(Tensor&, const int32_t*, int64_t))
  TANDEM_NO_OP(void copy(Tensor&, const Tensor&))
  TANDEM_NO_OP(void embedding(Tensor&, const Tensor&, const Tensor&, float))
  TANDEM_NO_OP(void linear(Tensor&, const Tensor&, const Linear&))
  TANDEM_NO_OP(void rms_norm(Tensor&, const Tensor&, const Tensor&, float, float))
  TANDEM_NO_OP(void add_rms_norm(Tensor&, Tensor&, const Tensor&, const Tensor&, float, float))
  TANDEM_NO_OP(void add(Tensor&, const Tensor&, const Tensor&))
  TANDEM_NO_OP(void scale(Tensor&, float))
  TANDEM_NO_OP(void softcap(Tensor&, float))
  TANDEM_NO_OP(void rope(Tensor&, const StepTensors&, const RopeSpec&))
  TANDEM_NO_OP(void gated_act(Tensor&, const Tensor&, Activation))
  TANDEM_NO_OP(void write_kv(PagedKv&, const Tensor&, const Tensor&, const StepTensors&))
  TANDEM_NO_OP(void attention(Tensor&, const Tensor&, const PagedKv&, const StepTensors&, const AttentionParams&))
  TANDEM_NO_OP(void gather_rows(Tensor&, const Tensor&, const Tensor&))
  TANDEM_NO_OP(void topk_route(Tensor&, Tensor&, const Tensor&, int, bool))
  TANDEM_NO_OP(void moe_experts(Tensor&, const Tensor&, const Tensor&, const Tensor&, const Linear&, const Linear&, Activation))
  TANDEM_NO_OP(void sample(Tensor&, std::span<const SampleRow>, std::span<SampledToken>, const Tensor*))
#undef TANDEM_NO_OP
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// GGUF row r of head h holds Hugging Face row (r / 2) + (r % 2)·half: the loaded q rows are
// the file's rows in that order, bytes for bytes (blocks move whole, undecoded).
void expect_unpermuted(const Tensor& loaded, const Tensor& stored, int heads) {
  ASSERT_EQ(loaded.dtype, stored.dtype);
  ASSERT_EQ(loaded.shape, stored.shape);
  const int64_t rows = stored.dim(0), head = rows / heads, half = head / 2;
  const size_t row_bytes = stored.nbytes() / size_t(rows);
  for (int64_t h = 0; h < heads; h++)
    for (int64_t r = 0; r < head; r++) {
      const int64_t from = h * head + 2 * (r % half) + r / half;
      ASSERT_EQ(std::memcmp(static_cast<const char*>(loaded.data) + size_t(h * head + r) * row_bytes,
                            static_cast<const char*>(stored.data) + size_t(from) * row_bytes, row_bytes),
                0)
          << "row " << h * head + r;
    }
}

TEST(GgufLoad, Q4_K_MLoadsItsBlocksAsStored) {
  auto gguf = GgufModel::open(oracle_gguf("llama-Q4_K_M.gguf"));
  GgufTranslation t = translate_gguf(*gguf);
  Checkpoint ck = Checkpoint::from_gguf(gguf, t.aliases);
  BlockKeepingBackend backend;
  WeightLoader w(ck, backend, llama_style_weight_map(), 0);
  // q and k q4_k, v q6_k: no single tensor holds them, so the projection is three pieces.
  Linear qkv = w.load_linear("layers.{i}.qkv", 0, {512, 256});
  ASSERT_EQ(qkv.pieces.size(), 3u);
  EXPECT_FALSE(qkv.weight.defined());
  EXPECT_EQ(qkv.out_features(), 512);
  EXPECT_EQ(qkv.in_features(), 256);
  EXPECT_EQ(qkv.pieces[0].weight.dtype, DType::Q4_K);
  EXPECT_EQ(qkv.pieces[1].weight.dtype, DType::Q4_K);
  EXPECT_EQ(qkv.pieces[2].weight.dtype, DType::Q6_K);
  EXPECT_EQ(qkv.pieces[2].weight.shape, (Shape{128, 256}));
  expect_unpermuted(qkv.pieces[0].weight, gguf->tensor("blk.0.attn_q.weight"), 4);
  expect_unpermuted(qkv.pieces[1].weight, gguf->tensor("blk.0.attn_k.weight"), 2);
  Tensor v = gguf->tensor("blk.0.attn_v.weight");
  EXPECT_EQ(std::memcmp(qkv.pieces[2].weight.data, v.data, v.nbytes()), 0);
  // gate and up share q4_k: one fused weight, gate's rows first.
  Linear gate_up = w.load_linear("layers.{i}.gate_up", 0, {1024, 256});
  EXPECT_TRUE(gate_up.pieces.empty());
  EXPECT_EQ(gate_up.weight.dtype, DType::Q4_K);
  Tensor gate = gguf->tensor("blk.0.ffn_gate.weight");
  EXPECT_EQ(std::memcmp(gate_up.weight.data, gate.data, gate.nbytes()), 0);
  EXPECT_EQ(w.load_linear("layers.{i}.down", 0, {256, 512}).weight.dtype, DType::Q6_K);
  EXPECT_EQ(w.load("embed", -1, {512, 256}).dtype, DType::Q4_K);
  // And the whole model builds on such a backend.
  auto model = load_model(oracle_gguf("llama-Q4_K_M.gguf"), backend);
  EXPECT_EQ(model->config().vocab_size, 512);
  EXPECT_EQ(weight_format_name(model->config(), std::nullopt), "Q4_K_M: q4_k 6, f32 4, q6_k 3");
}

TEST(GgufLoad, F32MetadataBecomesTheConfig) {
  auto gguf = GgufModel::open(oracle_gguf("llama-F32.gguf"));
  GgufTranslation t = translate_gguf(*gguf);
  const nlohmann::json& c = t.config;
  EXPECT_EQ(c["model_type"], "llama");
  EXPECT_EQ(c["num_hidden_layers"], 1);
  EXPECT_EQ(c["hidden_size"], 256);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["head_dim"], 64);
  EXPECT_EQ(c["vocab_size"], 512);
  EXPECT_EQ(c["tie_word_embeddings"], false);
  // eos 2 (<|im_end|>) and <|endoftext|> (0), which ends generation in llama.cpp too.
  EXPECT_EQ(c["eos_token_id"], nlohmann::json({0, 2}));
  ASSERT_EQ(t.rope_freq_divisors.size(), 32u);
  EXPECT_EQ(t.rope_freq_divisors.front(), 1.f);  // high frequencies unscaled
  EXPECT_EQ(t.rope_freq_divisors.back(), 8.f);   // low ones by the factor
  EXPECT_EQ(t.aliases.at("model.layers.0.self_attn.q_proj.weight").unpermute_heads, 4);
  EXPECT_EQ(t.aliases.at("model.layers.0.self_attn.k_proj.weight").unpermute_heads, 2);
  EXPECT_EQ(t.aliases.at("model.layers.0.self_attn.v_proj.weight").unpermute_heads, 0);
  EXPECT_EQ(t.aliases.at("lm_head.weight").gguf_name, "output.weight");
  EXPECT_EQ(t.aliases.count("rope_freqs.weight"), 0u);
}

TEST(GgufLoad, UnpermuteMovesWholeRows) {
  Tensor t = Tensor::empty_host(DType::F32, {8, 2});  // 2 heads of 4 rows
  for (int i = 0; i < 16; i++) t.ptr<float>()[i] = float(i / 2);  // row r holds r, r
  Tensor u = unpermute_head_rows(t, 2);
  const float want[] = {0, 2, 1, 3, 4, 6, 5, 7};  // GGUF 2i + j -> HF i + 2j within a head
  for (int r = 0; r < 8; r++) EXPECT_EQ(u.ptr<float>()[2 * r], want[r]) << r;
}

// A minimal llama GGUF (2 layers), with hooks to break it.
struct TinyLlama {
  std::function<void(GgufWriter&)> extra_metadata = [](GgufWriter&) {};
  std::vector<std::string> drop;      // metadata keys left out
  std::vector<std::string> extra_tensors;
  std::string arch = "llama";
  uint32_t block_count = 2;

  fs::path write(const std::string& name) const {
    GgufWriter w;
    auto u32 = [&](const std::string& k, uint32_t v) {
      if (std::find(drop.begin(), drop.end(), k) == drop.end()) w.add_u32(k, v);
    };
    w.add_string("general.architecture", arch);
    u32(arch + ".block_count", block_count);
    u32(arch + ".context_length", 128);
    u32(arch + ".embedding_length", 32);
    u32(arch + ".feed_forward_length", 64);
    u32(arch + ".attention.head_count", 2);
    u32(arch + ".attention.head_count_kv", 1);
    w.add_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
    extra_metadata(w);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 0.2f);
    auto add = [&](const std::string& n, Shape s) {
      std::string bytes(size_t(s.numel()) * 4, '\0');
      for (int64_t i = 0; i < s.numel(); i++) {
        float v = normal(rng);
        std::memcpy(&bytes[size_t(i) * 4], &v, 4);
      }
      w.add_tensor(n, DType::F32, s, bytes);
    };
    add("token_embd.weight", {16, 32});
    add("output_norm.weight", {32});
    for (int i = 0; i < 2; i++) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {32});
      add(b + "attn_q.weight", {32, 32});
      add(b + "attn_k.weight", {16, 32});
      add(b + "attn_v.weight", {16, 32});
      add(b + "attn_output.weight", {32, 32});
      add(b + "ffn_norm.weight", {32});
      add(b + "ffn_gate.weight", {64, 32});
      add(b + "ffn_up.weight", {64, 32});
      add(b + "ffn_down.weight", {32, 64});
    }
    for (const std::string& n : extra_tensors) add(n, {32});
    fs::path p = fs::temp_directory_path() / ("tandem-tiny-" + std::to_string(::getpid()) + name);
    w.write(p);
    return p;
  }
};

std::string load_error(const TinyLlama& m) {
  fs::path p = m.write(".gguf");
  auto backend = make_cpu_backend();
  std::string e = error_of([&] { load_model(p, *backend); });
  fs::remove(p);
  return e;
}

TEST(GgufLoad, TinyLlamaLoadsTied) {
  EXPECT_EQ(load_error(TinyLlama{}), "(no error)");  // no output.weight: tied embedding
}

TEST(GgufLoad, RefusalsNameTheKeyOrTensor) {
  EXPECT_NE(load_error(TinyLlama{.arch = "mamba"}).find("general.architecture 'mamba' is not one tandem serves"), std::string::npos);
  EXPECT_NE(load_error(TinyLlama{.drop = {"llama.embedding_length"}}).find("required metadata 'llama.embedding_length' is missing"), std::string::npos);
  EXPECT_NE(load_error(TinyLlama{.drop = {"llama.context_length"}}).find("'llama.context_length' is missing"), std::string::npos);
  EXPECT_NE(load_error(TinyLlama{.block_count = 1000000}).find("metadata 'llama.block_count' is 1000000, but the file holds tensors for 2 blocks"), std::string::npos);
  EXPECT_NE(load_error(TinyLlama{.block_count = 4294967295u}).find("'llama.block_count' is 4294967295, outside 1..2147483647"), std::string::npos);
  EXPECT_NE(load_error(TinyLlama{.extra_tensors = {"blk.0.mystery.weight"}}).find("tensor 'blk.0.mystery.weight' has no place in tandem's llama"), std::string::npos);
  EXPECT_NE(load_error(TinyLlama{.extra_tensors = {"blk.x.weight"}}).find("is not named blk.N.NAME.weight"), std::string::npos);
  TinyLlama rope;
  rope.extra_metadata = [](GgufWriter& w) { w.add_string("llama.rope.scaling.type", "longrope"); };
  EXPECT_NE(load_error(rope).find("'llama.rope.scaling.type' is longrope, which tandem does not implement"), std::string::npos);
  TinyLlama heads;
  heads.extra_metadata = [](GgufWriter& w) { w.add_u32("llama.attention.key_length", 8); };
  EXPECT_NE(load_error(heads).find("weight 'layers.0.qkv' has shape [64, 32] but the config implies [32, 32]"), std::string::npos);
  TinyLlama fp8;
  auto backend = make_cpu_backend();
  fs::path p = fp8.write("-fp8.gguf");
  EXPECT_NE(error_of([&] { load_model(p, *backend, LoadOptions{.online = online_quantization("fp8")}); })
                .find("a GGUF file's weights load as stored"),
            std::string::npos);
  fs::remove(p);
}

}  // namespace gguf_load_test
}  // namespace tandem

namespace tandem {
namespace gguf_load_test {

// A projection in pieces of different weight types (Linear::pieces) computes what one fused
// weight of the same values computes: each piece's columns, with its bias, side by side.
TEST(GgufLoad, PiecesComputeLikeOneFusedWeight) {
  auto be = make_cpu_backend();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random = [&](Shape s) {
    Tensor t = Tensor::empty_host(DType::F32, s);
    for (int64_t i = 0; i < t.numel(); i++) t.ptr<float>()[i] = normal(rng);
    return t;
  };
  const int64_t K = 16, T = 5;
  Tensor wq = random({6, K}), wk = random({3, K}), bq = random({6}), bk = random({3}), x = random({T, K});
  // k's weight rounded to bf16, as a bf16 piece holds it.
  Tensor wk16 = Tensor::empty_host(DType::BF16, wk.shape);
  convert_from_f32(wk.ptr<float>(), wk16.data, DType::BF16, size_t(wk.numel()));
  convert_to_f32(wk16.data, DType::BF16, wk.ptr<float>(), size_t(wk.numel()));
  Linear pieces;
  pieces.pieces.push_back({.weight = be->upload(wq, DType::F32), .bias = be->upload(bq, DType::F32)});
  pieces.pieces.push_back({.weight = be->upload(wk16, DType::BF16), .bias = be->upload(bk, DType::F32)});
  EXPECT_TRUE(pieces.defined());
  EXPECT_EQ(pieces.out_features(), 9);
  EXPECT_EQ(pieces.in_features(), K);
  Tensor w = Tensor::empty_host(DType::F32, {9, K}), b = Tensor::empty_host(DType::F32, {9});
  std::memcpy(w.data, wq.data, wq.nbytes());
  std::memcpy(w.ptr<float>() + 6 * K, wk.data, wk.nbytes());
  std::memcpy(b.data, bq.data, bq.nbytes());
  std::memcpy(b.ptr<float>() + 6, bk.data, bk.nbytes());
  Linear fused{.weight = be->upload(w, DType::F32), .bias = be->upload(b, DType::F32)};
  Tensor xd = be->upload(x, DType::F32);
  Tensor got = be->to_host_f32(linear(*be, xd, pieces)), want = be->to_host_f32(linear(*be, xd, fused));
  ASSERT_EQ(got.shape, (Shape{T, 9}));
  for (int64_t i = 0; i < got.numel(); i++)
    EXPECT_NEAR(got.ptr<float>()[i], want.ptr<float>()[i], 1e-5f * (1.f + std::fabs(want.ptr<float>()[i]))) << i;
}

}  // namespace gguf_load_test
}  // namespace tandem
