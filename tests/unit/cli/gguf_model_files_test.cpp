// `--model FILE.gguf` on the commands: the model, its weight types and its own tokenizer from
// the file; `--tokenizer DIR` replacing the tokenizer; the served name; the text tools on a
// GGUF file. `random-model --gguf` / `quantize --gguf` writing GGUF files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/gguf_model.h"
#include "loader/safetensors_writer.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace gguf_model_files_test {

namespace fs = std::filesystem;

const fs::path kGguf = fs::path(TANDEM_TEST_DATA) / "oracle" / "gguf" / "llama-F32.gguf";

TEST(GgufModelFiles, LoadsModelTokenizerAndWeightTypes) {
  LoadedModel m = load_model_folder(kGguf, "cpu");
  EXPECT_EQ(m.model->config().model_type, "llama");
  EXPECT_EQ(m.weight_format, "F32: f32 13");
  ASSERT_TRUE(m.tokenizer);
  EXPECT_EQ(m.tokenizer->vocab_size(), 512);
  EXPECT_EQ(m.tokenizer->encode("Hello, world!", false),
            (std::vector<int32_t>{42, 71, 78, 333, 14, 319, 271, 78, 70, 3}));
}

TEST(GgufModelFiles, TokenizerFolderWins) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-tok-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << byte_level_tokenizer_json(600);
  LoadedModel m = load_model_folder(kGguf, "cpu", {}, dir.string());
  EXPECT_EQ(m.tokenizer->vocab_size(), 600);
  EXPECT_EQ(tokenizer_source(kGguf.string(), dir.string()), dir);
  EXPECT_EQ(tokenizer_source(kGguf.string(), std::nullopt), kGguf);
  fs::remove(dir / "tokenizer.json");
  try {
    load_model_folder(kGguf, "cpu", {}, dir.string());
    ADD_FAILURE() << "a --tokenizer folder without tokenizer.json loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json there"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(GgufModelFiles, ServedNames) {
  EXPECT_EQ(default_served_name("a/b/Qwen2.5-7B-Q4_K_M.gguf"), "Qwen2.5-7B-Q4_K_M");
  EXPECT_EQ(default_served_name("x/llama-70b-00001-of-00003.gguf"), "llama-70b");
  EXPECT_EQ(default_served_name("models/tiny-kjv/"), "tiny-kjv");
  EXPECT_EQ(default_served_name("models/tiny-kjv"), "tiny-kjv");
}

TEST(GgufModelFiles, NeitherFolderNorGguf) {
  const fs::path f = fs::temp_directory_path() / ("tandem-notgguf-" + std::to_string(::getpid()));
  std::ofstream(f) << "plain text";
  try {
    load_model_folder(f, "cpu");
    ADD_FAILURE() << "a text file loaded as a model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a model folder nor a GGUF file"),
              std::string::npos);
  }
  fs::remove(f);
}

TEST(GgufModelFiles, TextToolsReadTheFile) {
  TextToolOptions o;
  o.model = kGguf.string();
  o.text = "Hello, world!";
  testing::internal::CaptureStdout();
  EXPECT_EQ(run_tokenize(o), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "[42,71,78,333,14,319,271,78,70,3]\n");
}

// `tandem random-model --gguf TYPE` writes the same file as `random-model` followed by
// `quantize --gguf TYPE` (byte for byte: the folder's bf16 values, llama-quantize's type mix,
// Llama 3 scaling as rope_freqs), streams it (peak memory far below the file's size), and the
// commands refuse what they cannot write with a message and no file.

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tandem_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json small_llama3(int hidden, int layers, int ffn, int vocab) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", hidden},
          {"num_hidden_layers", layers},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", hidden / 4},
          {"intermediate_size", ffn},
          {"vocab_size", vocab},
          {"tie_word_embeddings", false},
          {"hidden_act", "silu"},
          {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", 4096},
          {"rope_theta", 500000.0},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 8.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 256}}}};
}

fs::path write_config(const fs::path& dir, const json& c) {
  std::ofstream(dir / "config.json") << c.dump();
  return dir / "config.json";
}

TEST(QuantizeGguf, RandomModelGgufIsTheQuantizedFolder) {
  const fs::path d = scratch("random_gguf");
  const std::string config = write_config(d, small_llama3(256, 2, 512, 512)).string();
  ASSERT_EQ(run_random_model({.config = config, .out = (d / "hf").string()}), 0);
  fs::create_directories(d / "a");
  fs::create_directories(d / "b");
  ASSERT_EQ(
      run_quantize(
          {.model = (d / "hf").string(), .out = (d / "a" / "m.gguf").string(), .gguf = "Q4_K_M"}),
      0);
  ASSERT_EQ(
      run_random_model({.config = config, .out = (d / "b" / "m.gguf").string(), .gguf = "Q4_K_M"}),
      0);
  const std::string a = read_all(d / "a" / "m.gguf"), b = read_all(d / "b" / "m.gguf");
  EXPECT_GT(a.size(), 300000u);
  EXPECT_TRUE(a == b) << "sizes " << a.size() << " and " << b.size();
  auto model = GgufModel::open(d / "b" / "m.gguf");
  EXPECT_TRUE(model->find("rope_freqs.weight"));
  EXPECT_EQ(model->metadata().get_string("general.architecture"), "llama");
  EXPECT_FALSE(fs::exists(d / "b" / "m.gguf.tokenizer.tmp"));
  fs::remove_all(d);
}

// A Qwen3-MoE-shaped random model written as GGUF: llama.cpp's metadata keys, the router in
// f32, each layer's experts stacked as ffn_{gate,up,down}_exps [E, N, K] expert by expert (an
// F32 file: expert 2's up rows are the folder's experts.2.up_proj), and Q4_K_M's mix on them
// (down in Q6_K on the layers llama-quantize gives more bits).
TEST(QuantizeGguf, RandomModelGgufStacksTheExperts) {
  const fs::path d = scratch("random_gguf_moe");
  json c = small_llama3(256, 2, 512, 512);
  c.erase("rope_scaling");
  c["architectures"] = {"Qwen3MoeForCausalLM"};
  c["model_type"] = "qwen3_moe";
  c["num_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  c["moe_intermediate_size"] = 256;
  const std::string config = write_config(d, c).string();
  ASSERT_EQ(run_random_model({.config = config, .out = (d / "hf").string(), .dtype = "f32"}), 0);
  ASSERT_EQ(run_random_model(
                {.config = config, .out = (d / "m.gguf").string(), .dtype = "f32", .gguf = "F32"}),
            0);
  ASSERT_EQ(run_random_model({.config = config, .out = (d / "q.gguf").string(), .gguf = "Q4_K_M"}),
            0);
  auto model = GgufModel::open(d / "m.gguf");
  EXPECT_EQ(model->metadata().get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(model->metadata().get_int("qwen3moe.expert_count"), 4);
  EXPECT_EQ(model->metadata().get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(model->metadata().get_int("qwen3moe.expert_feed_forward_length"), 256);
  ASSERT_TRUE(model->find("blk.1.ffn_gate_inp.weight"));
  EXPECT_EQ(model->find("blk.1.ffn_gate_inp.weight")->info->shape, (Shape{4, 256}));
  const Tensor up = model->tensor("blk.1.ffn_up_exps.weight");
  ASSERT_EQ(up.shape, (Shape{4, 256, 256}));
  EXPECT_EQ(model->tensor("blk.1.ffn_down_exps.weight").shape, (Shape{4, 256, 256}));
  const Checkpoint ck = Checkpoint::open(d / "hf");
  const Tensor want = ck.get("model.layers.1.mlp.experts.2.up_proj.weight");
  ASSERT_EQ(want.dtype, DType::F32);
  EXPECT_EQ(
      std::memcmp(static_cast<const float*>(up.data) + 2 * 256 * 256, want.data, want.nbytes()), 0);
  auto q = GgufModel::open(d / "q.gguf");
  EXPECT_EQ(q->tensor("blk.0.ffn_gate_exps.weight").dtype, DType::Q4_K);
  // use_more_bits of 2 layers: the last (layer 1), not layer 0.
  EXPECT_EQ(q->tensor("blk.0.ffn_down_exps.weight").dtype, DType::Q4_K);
  EXPECT_EQ(q->tensor("blk.1.ffn_down_exps.weight").dtype, DType::Q6_K);
  EXPECT_EQ(q->tensor("blk.0.ffn_gate_inp.weight").dtype, DType::F32);
  // Experts on some layers only: the export refuses (its keys cannot say which), writing nothing.
  c["decoder_sparse_step"] = 2;
  const std::string sparse = write_config(d, c).string();
  const fs::path out = d / "sparse.gguf";
  EXPECT_EQ(
      run_random_model({.config = sparse, .out = out.string(), .dtype = "f32", .gguf = "F32"}), 1);
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(d);
}

// Peak resident memory growth while `fn` runs (VmHWM reset through /proc/self/clear_refs);
// nullopt where the kernel does not let the peak be reset, and under AddressSanitizer, whose
// quarantine keeps freed memory resident (the bounds are then checked in the Release job).
template <typename Fn>
std::optional<int64_t> peak_growth(Fn&& fn) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  fn();
  return std::nullopt;
#endif
#endif
  auto status = [](const std::string& key) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key, 0) == 0) return int64_t(std::stoll(line.substr(key.size()))) * 1024;
    return int64_t(-1);
  };
  std::ofstream clear("/proc/self/clear_refs");
  if (!(clear << "5" << std::flush)) return std::nullopt;
  const int64_t before = status("VmRSS:");
  fn();
  return status("VmHWM:") - before;
}

TEST(QuantizeGguf, RandomModelStreamsTheFile) {
  const fs::path d = scratch("random_gguf_stream");
  const std::string config = write_config(d, small_llama3(1024, 8, 4096, 16384)).string();
  int rc = -1;
  auto growth = peak_growth([&] {
    rc = run_random_model({.config = config, .out = (d / "big.gguf").string(), .gguf = "Q8_0"});
  });
  ASSERT_EQ(rc, 0);
  const auto size = int64_t(fs::file_size(d / "big.gguf"));
  EXPECT_GT(size, int64_t(160) << 20);  // 161M parameters in Q8_0
  // A chunk is ~8 MB of encoded rows, staged as f32 source rows (4x that for Q8_0) and the
  // bf16 values they come from: bounded by the chunk, not the file (a held file is > size).
  if (growth) {
    EXPECT_LT(*growth, size / 2) << "the file is " << size << " bytes";
  }
  fs::remove_all(d);
}

TEST(QuantizeGguf, RefusalsWriteNothing) {
  const fs::path d = scratch("quantize_gguf_refusals");
  const std::string oracle = (fs::path(TANDEM_TEST_DATA) / "oracle" / "llama").string();
  const fs::path out = d / "x.gguf";
  EXPECT_EQ(run_quantize({.model = oracle, .out = out.string(), .gguf = "Q3_K_S"}), 1);
  EXPECT_EQ(run_quantize({.model = oracle, .out = d.string(), .gguf = "Q8_0"}), 1);  // a folder
  EXPECT_EQ(run_quantize({.model = (fs::path(TANDEM_TEST_DATA) / "oracle" / "gemma2").string(),
                          .out = out.string(),
                          .gguf = "Q8_0"}),
            1);  // an architecture the export does not write
  EXPECT_EQ(
      run_random_model({.like = "llama-100m", .out = out.string(), .dtype = "fp8", .gguf = "Q8_0"}),
      1);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(fs::path(out).concat(".tmp")));
  fs::remove_all(d);
}

// A NaN among the weights is refused naming the tensor and the row (quantize_row refuses it on
// a pool thread; the writer carries the refusal out) and leaves no file.
TEST(QuantizeGguf, NonFiniteWeightIsRefusedByName) {
  const fs::path d = scratch("quantize_gguf_nan");
  const std::string config = write_config(d, small_llama3(256, 2, 512, 512)).string();
  ASSERT_EQ(run_random_model({.config = config, .out = (d / "hf").string(), .dtype = "f32"}), 0);
  const Checkpoint ck = Checkpoint::open(d / "hf");
  SafetensorsWriter w;
  for (const std::string& name : ck.names()) {
    const Tensor t = ck.get(name);
    if (name != "model.layers.1.mlp.up_proj.weight") {
      w.add(name, t);
      continue;
    }
    w.add(name, DType::F32, {t.shape[0], t.shape[1]}, [t](void* dst, size_t bytes) {
      std::memcpy(dst, t.data, bytes);
      static_cast<float*>(dst)[3 * 256 + 5] = std::nanf("");
    });
  }
  fs::create_directories(d / "nan");
  w.write_sharded(d / "nan", uint64_t(1) << 30);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(d / "hf" / f, d / "nan" / f);
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_quantize(
                {.model = (d / "nan").string(), .out = (d / "x.gguf").string(), .gguf = "Q4_K_M"}),
            1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("tensor 'model.layers.1.mlp.up_proj.weight' row 3"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(d / "x.gguf"));
  fs::remove_all(d);
}

}  // namespace gguf_model_files_test
}  // namespace tandem::cli
