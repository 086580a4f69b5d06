// Tensor parallelism over the other weight formats (docs/tensor-parallel.md): GGUF files,
// their block types cut into whole block rows and into input columns between blocks; FP8
// checkpoints cut with their scales (per tensor, per channel, whole blocks) and
// --quantization fp8 quantizing each rank's slices; and the splits that would cut a block,
// refused naming the tensor; GGUF files on GPU ranks too (NCCL; skipped without a GPU).
// The safetensors 16-bit cases are tensor_parallel_test.cpp's.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "engine/teacher_forcing.h"
#include "engine/tp_ranks.h"
#include "fp8_moe_fixture.h"
#include "gguf_golden.h"
#include "loader/gguf_model.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors.h"
#include "model/arch/gemma_tp.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/gguf_translate.h"
#include "model/layers.h"
#include "model/model.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace tensor_parallel_formats_test {

cli::LoadedModel load_ranks_at(const std::filesystem::path& dir, int size) {
  return cli::load_model_folder(dir, "cpu", LoadOptions{.tp = {.size = size}});
}

// GGUF files under tensor parallelism: block-type weights cut into whole block rows (q|k|v,
// gate|up, the vocabulary) and into input columns between blocks (o, down). Each rank's
// logits against the same file at N = 1 in the same block arithmetic: with the exact one
// (f32 activations) equal up to the order of the sums, 1e-4, and within 1e-4 of the float64
// oracle; with int8 activations a last-bit difference may round an activation to its other
// int8 neighbour, so 5e-3 (the oracle's own bar for it is 5e-2).
struct GgufTpCase {
  std::string file;  // under tests/data/oracle/gguf/
  int size;
  cpu::BlockArithmetic arithmetic;
  double vs_one, vs_oracle;  // relative errors allowed
};

// A GGUF file on a CPU backend of `arithmetic`, at one rank (size 1) or `size` ranks.
struct GgufRanks {
  CpuBackend backend;
  std::unique_ptr<Model> model;  // rank 0's
  std::shared_ptr<TpRanks> ranks;
  GgufRanks(const std::string& file, int size, cpu::BlockArithmetic arithmetic) {
    backend.set_block_arithmetic(arithmetic);
    if (size == 1)
      model = load_model(gguf_dir() / file, backend);
    else
      ranks = TpRanks::load(gguf_dir() / file, size, {.tp = {.size = size}}, backend, model);
  }
};

class TensorParallelGguf : public ::testing::TestWithParam<GgufTpCase> {};

TEST_P(TensorParallelGguf, LogitsMatchOneRankAndTheSlicesAddUp) {
  const GgufTpCase& g = GetParam();
  GgufRanks one(g.file, 1, g.arithmetic), m(g.file, g.size, g.arithmetic);
  for (const GgufGolden& p : load_gguf_golden(g.file)) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    const Tensor want = teacher_forced_logits(*one.model, one.backend, ids);
    const Tensor ours = teacher_forced_logits(*m.ranks, ids, 5);
    ASSERT_EQ(ours.numel(), want.numel());
    const size_t n = size_t(want.numel());
    EXPECT_LE(relative_error(ours.ptr<float>(), want.ptr<float>(), n), g.vs_one)
        << "prompt of " << p.prompt.size() << " tokens";
    EXPECT_LE(relative_error(ours.ptr<float>(), p.logits.ptr<float>(), n), g.vs_oracle)
        << "prompt of " << p.prompt.size() << " tokens";
  }
  // The slices tile the file (4 heads, 2 KV heads: at N = 4 each KV head's k and v rows are
  // held by two ranks).
  const ModelConfig& c = one.model->config();
  int64_t sum = 0;
  for (int r = 0; r < m.ranks->size(); r++) sum += m.ranks->model(r).num_parameters();
  const int extra_kv_heads = std::max(0, g.size - c.num_kv_heads);
  EXPECT_EQ(sum, one.model->num_parameters() +
                     int64_t(extra_kv_heads) * 2 * c.head_dim * c.hidden_size * c.num_layers);
}

constexpr auto kExact = cpu::BlockArithmetic::Exact, kInt8 = cpu::BlockArithmetic::Int8;

INSTANTIATE_TEST_SUITE_P(Files, TensorParallelGguf,
                         ::testing::Values(GgufTpCase{"llama-F32.gguf", 2, kInt8, 1e-4, 1e-4},
                                           GgufTpCase{"llama-F32.gguf", 4, kInt8, 1e-4, 1e-4},
                                           GgufTpCase{"llama-Q8_0.gguf", 2, kExact, 1e-4, 1e-4},
                                           GgufTpCase{"llama-Q4_0.gguf", 2, kExact, 1e-4, 1e-4},
                                           GgufTpCase{"llama-Q4_0.gguf", 4, kExact, 1e-4, 1e-4},
                                           GgufTpCase{"llama-Q8_0.gguf", 2, kInt8, 5e-3, 5e-2},
                                           GgufTpCase{"llama-Q4_0.gguf", 4, kInt8, 5e-3, 5e-2}),
                         [](const auto& info) {
                           const std::string& f =
                               info.param.file;  // "llama-Q4_0.gguf" -> "Q4_0_tp2_exact"
                           return f.substr(6, f.size() - 11) + "_tp" +
                                  std::to_string(info.param.size) + "_" +
                                  std::string(cpu::block_arithmetic_name(info.param.arithmetic));
                         });

// GGUF on GPU ranks (skipped without a GPU or NCCL): the Q8_0 and Q4_0 files as one rank,
// whose embedding table is the block table's rows dequantized (layers.h, vocab_slice_table),
// give the single CUDA worker's teacher-forced logits; as two ranks on two GPUs (where
// there are two), the block slices cut between blocks, within bf16's noise of one GPU.
TEST(TensorParallelNcclGguf, GpuRanksMatchTheSingleWorker) {
  if (cuda_device_count() < 1 || !nccl_available()) GTEST_SKIP() << "needs a GPU and NCCL";
  for (const char* file : {"llama-Q8_0.gguf", "llama-Q4_0.gguf"}) {
    auto one = make_cuda_backend(0);
    std::unique_ptr<Model> whole = load_model(gguf_dir() / file, *one);
    for (const int size : {1, 2}) {
      if (size > cuda_device_count()) continue;
      auto backend0 = make_cuda_backend(0);
      std::unique_ptr<Model> model0;
      auto ranks =
          TpRanks::load(gguf_dir() / file, size, {.tp = {.size = size}}, *backend0, model0);
      for (const GgufGolden& p : load_gguf_golden(file)) {
        std::vector<int32_t> ids = p.prompt;
        ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
        const Tensor want = teacher_forced_logits(*whole, *one, ids);
        const Tensor got = teacher_forced_logits(*ranks, ids);
        ASSERT_EQ(got.numel(), want.numel());
        EXPECT_LE(relative_error(got.ptr<float>(), want.ptr<float>(), size_t(want.numel())),
                  size == 1 ? 1e-6 : 3e-2)
            << file << " at TP=" << size << ", prompt of " << p.prompt.size() << " tokens";
      }
    }
  }
}

TEST(TensorParallelErrors, ABlockSplitInsideItsBlocksIsNamed) {
  // Q4_K_M's attn_output is q4_k (256-value blocks) with 256 input columns: 128 a rank at N = 2.
  const std::string e = error_of(
      [] { cli::load_model_folder(gguf_dir() / "llama-Q4_K_M.gguf", "cpu", {.tp = {.size = 2}}); });
  for (const char* part : {"blk.0.attn_output.weight", "q4_k", "--tensor-parallel-size 2",
                           "slices of 128 columns", "256-value blocks"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
}

// A projection whose sources differ in type (Q4_K_M's q4_k q and k, q6_k v) is loaded as
// pieces; under tensor parallelism each rank's pieces are its heads' rows of them: its
// output equals those rows of the whole projection's output.
TEST(TensorParallelGguf, MixedTypePiecesAreCutByHeads) {
  auto gguf = GgufModel::open(gguf_dir() / "llama-Q4_K_M.gguf");
  GgufTranslation t = translate_gguf(*gguf);
  const ModelConfig c = ModelConfig::parse(t.config, "llama-Q4_K_M.gguf");
  const Checkpoint checkpoint = Checkpoint::from_gguf(gguf, t.aliases);
  const int64_t D = c.hidden_size, Dh = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  CpuBackend be;
  Tensor x = Tensor::empty_host(DType::F32, {3, D});
  for (int64_t i = 0; i < x.numel(); i++) x.ptr<float>()[i] = float((i * 37) % 101) / 50.f - 1.f;
  const Tensor xd = be.upload(x, be.act_dtype());
  auto output = [&](const Linear& l) { return be.to_host_f32(linear(be, xd, l)); };
  WeightLoader whole_loader(checkpoint, be, llama_style_weight_map(), 0);
  const Linear whole = whole_loader.load_linear("layers.{i}.qkv", 0, {(Hq + 2 * Hkv) * Dh, D});
  ASSERT_EQ(whole.pieces.size(), 3u);
  const Tensor want = output(whole);
  for (int r = 0; r < 2; r++) {
    WeightLoader w(checkpoint, be, llama_style_weight_map(), 0);
    const TpShard tp{.rank = r, .size = 2};
    w.set_slicer(decoder_slicer(c, tp), r);
    const Linear mine = w.load_linear("layers.{i}.qkv", 0, {(Hq + 2 * Hkv) * Dh / 2, D});
    const Tensor got = output(mine);
    // Rank r's columns: its q heads, then its k head and its v head.
    const int64_t q = Hq / 2 * Dh, kv = Dh, W = (Hq + 2 * Hkv) * Dh;
    const std::vector<std::pair<int64_t, int64_t>> cols = {
        {r * q, q}, {Hq * Dh + r * kv, kv}, {(Hq + Hkv) * Dh + r * kv, kv}};
    for (int64_t row = 0; row < 3; row++) {
      int64_t j = 0;
      for (auto [first, n] : cols)
        for (int64_t k = 0; k < n; k++, j++)
          ASSERT_NEAR(got.ptr<float>()[row * (W / 2) + j], want.ptr<float>()[row * W + first + k],
                      1e-5)
              << "rank " << r << ", row " << row << ", column " << j;
    }
  }
}

// FP8 under tensor parallelism: each rank's FP8 rows or columns with their scales (per
// tensor, per channel, whole [bn, bk] blocks), or its slices quantized per channel
// (--quantization fp8). `ids` teacher-forced at N = 1 and N = `size`; the worst relative
// error over `prompts`.
double fp8_tp_error(const std::filesystem::path& dir, int size,
                    const std::vector<std::vector<int32_t>>& prompts,
                    std::optional<QuantScheme> online = std::nullopt) {
  cli::LoadedModel one = cli::load_model_folder(dir, "cpu", {.online = online});
  cli::LoadedModel m = cli::load_model_folder(dir, "cpu", {.online = online, .tp = {.size = size}});
  double worst = 0;
  for (const auto& ids : prompts) {
    const Tensor want = teacher_forced_logits(*one.model, *one.backend, ids);
    const Tensor got = teacher_forced_logits(*m.tp_ranks, ids, 5);
    EXPECT_EQ(got.numel(), want.numel());
    worst =
        std::max(worst, relative_error(got.ptr<float>(), want.ptr<float>(), size_t(want.numel())));
  }
  std::printf("%s at -tp %d%s: %.2e from -tp 1\n", dir.filename().c_str(), size,
              online ? " (online fp8)" : "", worst);
  return worst;
}

std::vector<std::vector<int32_t>> oracle_ids(const std::string& arch) {
  std::vector<std::vector<int32_t>> out;
  for (const OraclePrompt& p : load_oracle(arch)) {
    out.push_back(p.prompt);
    out.back().insert(out.back().end(), p.greedy.begin(), p.greedy.end());
  }
  return out;
}

std::filesystem::path fp8_dir(const std::string& name) {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "fp8" / name;
}

// Through whole models the FP8 activations' dynamic scales differ by rank (a rank scales
// the columns it holds) and one flipped e4m3 rounding moves these tiny models' logits by
// 1e-2..1e-1 (fp8_oracle_test.cpp), so the slices are checked at each projection: an input
// whose every token has its largest magnitude (1) in every rank's columns scales the same
// at N = 1 and N = 2; then a row-split projection's ranks give exactly their rows of the
// whole one's output, and a column-split one's partial outputs add up to it.
void expect_fp8_projections_split(const std::filesystem::path& dir,
                                  std::optional<QuantScheme> online, double column_tolerance) {
  ModelConfig c = ModelConfig::load(dir);
  Checkpoint checkpoint = Checkpoint::open(dir);
  checkpoint.set_quant(model_quant_scheme(c, online));
  const int64_t D = c.hidden_size, Q = c.num_heads * c.head_dim, F = c.intermediate_sizes[0];
  const int64_t QKV = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  CpuBackend be;
  WeightLoader whole_loader(checkpoint, be, llama_style_weight_map(), 0);
  for (auto [name, rows, cols, by_rows] : {std::tuple{"layers.{i}.qkv", QKV, D, true},
                                           {"layers.{i}.gate_up", 2 * F, D, true},
                                           {"layers.{i}.o", D, Q, false},
                                           {"layers.{i}.down", D, F, false}}) {
    const Linear whole = whole_loader.load_linear(name, 1, {rows, cols});
    ASSERT_TRUE(whole.quant.has_value()) << name << " did not load as FP8";
    const int64_t T = 3, k = cols / 2;
    Tensor x = Tensor::empty_host(DType::F32, {T, cols});
    for (int64_t i = 0; i < x.numel(); i++) {
      const int64_t col = i % cols;
      x.ptr<float>()[i] = col % k == (i / cols) % k ? 1.f : float((i * 37) % 101) / 202.f - 0.25f;
    }
    const Tensor want = be.to_host_f32(linear(be, be.upload(x, be.act_dtype()), whole));
    std::vector<float> sum(size_t(T * rows), 0.f);
    for (int r = 0; r < 2; r++) {
      WeightLoader w(checkpoint, be, llama_style_weight_map(), 0);
      w.set_slicer(decoder_slicer(c, {.rank = r, .size = 2}), r);
      const Linear mine = w.load_linear(name, 1, {by_rows ? rows / 2 : rows, by_rows ? cols : k});
      Tensor xr = by_rows ? x : Tensor::empty_host(DType::F32, {T, k});
      for (int64_t t = 0; !by_rows && t < T; t++)
        std::copy_n(x.ptr<float>() + t * cols + r * k, k, xr.ptr<float>() + t * k);
      const Tensor got = be.to_host_f32(linear(be, be.upload(xr, be.act_dtype()), mine));
      for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < got.cols(); j++) {
          const float g = got.ptr<float>()[t * got.cols() + j];
          if (!by_rows) {
            sum[size_t(t * rows + j)] += g;
            continue;
          }
          sum[size_t(t * rows + j)] = g;  // rank r's rows, compared below
        }
      if (by_rows) {
        const WeightSlice slice = decoder_slicer(c, {.rank = r, .size = 2})(name, 1);
        for (int64_t t = 0; t < T; t++) {
          int64_t j = 0;
          for (const WeightSlice::Range& range : slice.rows)
            for (int64_t i = 0; i < range.count; i++, j++)
              EXPECT_NEAR(sum[size_t(t * rows + j)], want.ptr<float>()[t * rows + range.begin + i],
                          1e-5 * (1 + std::fabs(want.ptr<float>()[t * rows + range.begin + i])))
                  << name << " rank " << r << " row " << range.begin + i;
        }
      }
    }
    if (!by_rows) {
      EXPECT_LE(relative_error(sum.data(), want.ptr<float>(), sum.size()), column_tolerance)
          << name;
    }
  }
}

TEST(TensorParallelFp8, CheckpointProjectionsSplitWithTheirScales) {
  expect_fp8_projections_split(fp8_dir("llama_per_channel"), std::nullopt, 1e-5);
}

TEST(TensorParallelFp8, OnlineQuantizationSplitsEveryProjection) {
  // Row splits quantize the same rows. A column split's rank quantizes its columns only,
  // each row scaled by its largest magnitude there (as vLLM's ranks quantize their shards),
  // so the partial outputs add up to N = 1's within FP8 rounding, not exactly.
  expect_fp8_projections_split(oracle_dir("llama"), online_quantization("fp8"), 5e-2);
}

// End to end: the ranks' logits against N = 1's, within what the flipped activation
// roundings above allow (a wrong scale or block mapping is off by far more).
TEST(TensorParallelFp8, WholeModelsStayNearOneRank) {
  auto golden = SafetensorsFile::open(fp8_dir("llama_per_channel") / "fp8_golden.safetensors");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; golden->has("ids." + std::to_string(i)); i++)
    prompts.push_back(ids_of(golden->tensor("ids." + std::to_string(i))));
  for (int size : {2, 4})
    EXPECT_LE(fp8_tp_error(fp8_dir("llama_per_channel"), size, prompts), 1.5e-1);
  // Mixtral's experts in [16, 32] blocks (fp8_moe_fixture.h): gate|up rows and down columns
  // cut between blocks, so the activations' groups are N = 1's.
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("tandem-tp-fp8-" + std::to_string(::getpid()));
  const std::filesystem::path dir =
      fp8_moe::write_fp8_moe(oracle_dir("mixtral"), tmp, fp8_moe::Layout::Block);
  const double blocks = fp8_tp_error(dir, 2, oracle_ids("mixtral"));
  std::filesystem::remove_all(tmp);
  EXPECT_LE(blocks, 3e-2);
  // Quantized at load, experts too (each rank its slice: OnlineExpertsQuantizeEachRanksSlice).
  for (const char* arch : {"qwen3_moe", "mixtral"})
    EXPECT_LE(fp8_tp_error(oracle_dir(arch), 2, oracle_ids(arch), online_quantization("fp8")), 0.5)
        << arch;
}

// --quantization fp8 on MoE experts under -tp 2: each rank quantizes only its slice. Its
// gate|up rows are whole rows of each expert, so they are byte for byte -tp 1's rows with
// their scales; its down columns are quantized per row over its own columns, so each scale
// is at most -tp 1's (the amax of fewer values) and the weights dequantize to the same
// values within e4m3 rounding.
TEST(TensorParallelFp8, OnlineExpertsQuantizeEachRanksSlice) {
  for (const char* arch : {"mixtral", "qwen3_moe"}) {
    const bool mixtral = std::string(arch) == "mixtral";
    const ModelConfig c = ModelConfig::load(oracle_dir(arch));
    CpuBackend be;
    const auto online = online_quantization("fp8");
    const fp8_moe::LayerExperts whole =
        fp8_moe::load_layer_experts(oracle_dir(arch), mixtral, be, online, 1);
    const Tensor whole_up_scale = be.to_host_f32(whole.gate_up.quant->weight_scale);
    const Tensor whole_down_scale = be.to_host_f32(whole.down.quant->weight_scale);
    const int64_t E = c.num_experts, D = c.hidden_size, Fe = c.moe_intermediate_size, K = Fe / 2;
    for (int r = 0; r < 2; r++) {
      const TpShard tp{.rank = r, .size = 2};
      const fp8_moe::LayerExperts mine =
          fp8_moe::load_layer_experts(oracle_dir(arch), mixtral, be, online, 1, tp);
      ASSERT_TRUE(mine.gate_up.quant && mine.down.quant) << arch << " rank " << r;
      ASSERT_EQ(mine.gate_up.weight.shape, (Shape{E, Fe, D}));
      ASSERT_EQ(mine.down.weight.shape, (Shape{E, D, K}));
      const Tensor up_scale = be.to_host_f32(mine.gate_up.quant->weight_scale);
      const WeightSlice slice = decoder_slicer(c, tp)("layers.{i}.experts_gate_up", 1);
      int mismatched = 0;
      for (int64_t e = 0; e < E; e++) {
        int64_t j = 0;
        for (const WeightSlice::Range& range : slice.rows)
          for (int64_t i = 0; i < range.count; i++, j++) {
            const int64_t row = e * 2 * Fe + range.begin + i, my_row = e * Fe + j;
            mismatched +=
                std::memcmp(whole.gate_up.weight.ptr<uint8_t>() + row * D,
                            mine.gate_up.weight.ptr<uint8_t>() + my_row * D, size_t(D)) != 0;
            mismatched += whole_up_scale.ptr<float>()[row] != up_scale.ptr<float>()[my_row];
          }
      }
      EXPECT_EQ(mismatched, 0) << arch << " rank " << r << ": gate|up rows differ from -tp 1's";
      const Tensor down_scale = be.to_host_f32(mine.down.quant->weight_scale);
      std::vector<float> got(size_t(E * D * K)), want(got.size()), wq(got.size() / size_t(E * D));
      int smaller = 0;
      for (int64_t row = 0; row < E * D; row++) {
        const float s = down_scale.ptr<float>()[row], ws = whole_down_scale.ptr<float>()[row];
        EXPECT_LE(s, ws) << arch << " rank " << r << " down row " << row;
        smaller += s < ws;
        convert_to_f32(mine.down.weight.ptr<uint8_t>() + row * K, DType::F8E4M3,
                       got.data() + row * K, size_t(K));
        convert_to_f32(whole.down.weight.ptr<uint8_t>() + row * Fe + r * K, DType::F8E4M3,
                       wq.data(), size_t(K));
        for (int64_t k = 0; k < K; k++)
          got[size_t(row * K + k)] *= s, want[size_t(row * K + k)] = wq[size_t(k)] * ws;
      }
      EXPECT_GT(smaller, 0) << arch << ": rank " << r << " copied -tp 1's down scales";
      const double err = relative_error(got.data(), want.data(), got.size());
      std::printf("%s rank %d: online down columns vs -tp 1's, dequantized: %.2e\n", arch, r, err);
      EXPECT_LE(err, 6e-2) << arch << " rank " << r;  // e4m3 steps are 1/16..1/8 of a value
    }
  }
}

// Gemma 4's layers differ in heads and widths, Gemma 3n's per-layer vocabulary is its own:
// each is checked per layer before any weight is read, the error naming it.
TEST(TensorParallelErrors, GemmaPerLayerDimensionsAreNamed) {
  const cli::LoadedModel whole = cli::load_model_folder(oracle_dir("gemma4_kvshare"), "cpu");
  const ModelConfig& c = whole.model->config();
  arch::Gemma4Config g = arch::parse_gemma4_config(c);
  arch::check_gemma4_tp(c, g, 2);  // the fixture splits
  g.layers[2].num_kv_heads = 3;
  std::string e = error_of([&] { arch::check_gemma4_tp(c, g, 2); });
  EXPECT_NE(
      e.find("layer 2's num_key_value_heads = 3 is not divisible by --tensor-parallel-size 2"),
      std::string::npos)
      << e;
  g = arch::parse_gemma4_config(c);
  g.enable_moe_block = true;
  g.moe_intermediate_size = 30;
  e = error_of([&] { arch::check_gemma4_tp(c, g, 4); });
  EXPECT_NE(e.find("moe_intermediate_size = 30 is not divisible by --tensor-parallel-size 4"),
            std::string::npos)
      << e;
  ModelConfig c3n = cli::load_model_folder(oracle_dir("gemma3n"), "cpu").model->config();
  arch::Gemma3nConfig g3n = arch::Gemma3nConfig::parse(c3n);
  g3n.vocab_size_per_layer_input = 1026;  // ≥ vocab_size: the table is split by its own rows
  e = error_of([&] { arch::check_gemma3n_tp(c3n, g3n, 4); });
  EXPECT_NE(
      e.find("vocab_size_per_layer_input = 1026 is not divisible by --tensor-parallel-size 4"),
      std::string::npos)
      << e;
}

TEST(TensorParallelErrors, AnFp8SplitInsideItsScaleBlocksIsNamed) {
  // q_proj [64, 64] has one 128x128 scale block; at N = 2 a rank's 32 rows end inside it.
  const std::string e = error_of([] { load_ranks_at(fp8_dir("llama_block"), 2); });
  for (const char* part :
       {"q_proj.weight", "128x128 scale blocks", "--tensor-parallel-size 2", "rows [0, 32)"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
  // Qwen3-MoE's experts in [16, 32] blocks at N = 4: down's 64 input columns give 16 a rank.
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("tandem-tp-fp8-cut-" + std::to_string(::getpid()));
  const std::filesystem::path dir =
      fp8_moe::write_fp8_moe(oracle_dir("qwen3_moe"), tmp, fp8_moe::Layout::Block);
  const std::string cols = error_of([&] { load_ranks_at(dir, 4); });
  std::filesystem::remove_all(tmp);
  for (const char* part :
       {"down_proj.weight", "16x32 scale blocks", "--tensor-parallel-size 4", "columns [0, 16)"})
    EXPECT_NE(cols.find(part), std::string::npos) << part << " in: " << cols;
}

}  // namespace tensor_parallel_formats_test
}  // namespace tandem::test
