// GgufModel: a single file, and split models (NAME-0000K-of-0000N.gguf) given their first
// shard, with every way a set of shards can be inconsistent. And the per-tensor types of the
// GGUF file types `tandem quantize --gguf` writes (loader/gguf_quant_plan.h).
#include "loader/gguf_model.h"

#include <gtest/gtest.h>

#include "loader/gguf_quant_plan.h"
#include "loader/gguf_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace gguf_model_test {

namespace fs = std::filesystem;
using test::TempDir;

std::string f32_bytes(int n, float base) {
  std::string s(size_t(n) * 4, '\0');
  for (int i = 0; i < n; i++) {
    float v = base + float(i);
    std::memcpy(&s[size_t(i) * 4], &v, 4);
  }
  return s;
}

// Shard `no` (0-based) of `count`, holding tensors t<no>a and t<no>b.
GgufWriter shard(int no, int count, int total_tensors) {
  GgufWriter w;
  w.add_u32("split.no", uint32_t(no));
  w.add_u32("split.count", uint32_t(count));
  if (no == 0) {
    w.add_i32("split.tensors.count", total_tensors);
    w.add_string("general.architecture", "llama");
  }
  for (const char* suffix : {"a", "b"})
    w.add_tensor(fmt::format("t{}{}", no, suffix), DType::F32, {4}, f32_bytes(4, float(no * 10)));
  return w;
}

void write_split(const fs::path& dir, int count, int total_tensors) {
  for (int i = 0; i < count; i++)
    shard(i, count, total_tensors).write(gguf_shard_path((dir / "m").string(), i + 1, count));
}

TEST(GgufModel, SingleFile) {
  auto m = GgufModel::open(fs::path(TANDEM_TEST_DATA) / "oracle" / "gguf" / "llama-F32.gguf");
  EXPECT_EQ(m->shards().size(), 1u);
  EXPECT_EQ(m->tensor_names().size(), 13u);
  EXPECT_EQ(m->tensor_names().front(), "rope_freqs.weight");
  EXPECT_EQ(m->tensor("output.weight").shape, (Shape{512, 256}));
  EXPECT_EQ(m->total_bytes(), 3423840u);
  EXPECT_CONTAINS(test::error_of([&] { m->tensor("nope"); }), "tensor 'nope' not found");
}

TEST(GgufModel, OpensEveryShardFromTheFirst) {
  TempDir dir;
  write_split(dir.path(), 3, 6);
  EXPECT_EQ(gguf_shard_path((dir / "m").string(), 1, 3), dir / "m-00001-of-00003.gguf");
  auto m = GgufModel::open(dir / "m-00001-of-00003.gguf");
  ASSERT_EQ(m->shards().size(), 3u);
  EXPECT_EQ(m->tensor_names().size(), 6u);
  EXPECT_EQ(m->metadata().require_string("general.architecture"), "llama");
  Tensor t = m->tensor("t2b");
  EXPECT_EQ(t.ptr<float>()[1], 21.f);
  EXPECT_EQ(m->find("t1a")->file->path(), dir / "m-00002-of-00003.gguf");
}

TEST(GgufModel, RefusesInconsistentShards) {
  {
    TempDir dir;
    write_split(dir.path(), 3, 6);
    fs::remove(dir / "m-00003-of-00003.gguf");
    EXPECT_CONTAINS(test::error_of([&] { GgufModel::open(dir / "m-00001-of-00003.gguf"); }),
                    "shard 3 of 3 is missing");
    EXPECT_CONTAINS(test::error_of([&] { GgufModel::open(dir / "m-00002-of-00003.gguf"); }),
                    "is shard 2 of 3 of a split model: give the first shard");
  }
  {
    TempDir dir;
    write_split(dir.path(), 2, 5);
    EXPECT_CONTAINS(test::error_of([&] { GgufModel::open(dir / "m-00001-of-00002.gguf"); }),
                    "metadata 'split.tensors.count' is 5, but the 2 shards hold 4 tensors");
  }
  {
    TempDir dir;
    write_split(dir.path(), 2, 4);
    shard(0, 2, 4).write(dir / "m-00002-of-00002.gguf");  // shard 1 again
    EXPECT_CONTAINS(test::error_of([&] { GgufModel::open(dir / "m-00001-of-00002.gguf"); }),
                    "say it is not shard 2 of 2");
  }
  {
    TempDir dir;
    write_split(dir.path(), 2, 4);
    GgufWriter w = shard(1, 2, 4);
    w.add_tensor("t0a", DType::F32, {4}, f32_bytes(4, 0));
    w.write(dir / "m-00002-of-00002.gguf");
    EXPECT_CONTAINS(test::error_of([&] { GgufModel::open(dir / "m-00001-of-00002.gguf"); }),
                    "tensor 't0a' appears in both");
  }
  {
    TempDir dir;
    shard(0, 2, 4).write(dir / "renamed.gguf");
    EXPECT_CONTAINS(test::error_of([&] { GgufModel::open(dir / "renamed.gguf"); }),
                    "must be named NAME-00001-of-00002.gguf");
  }
}

// The per-tensor types of a GGUF file type: llama-quantize's choices (llama.cpp
// src/llama-quant.cpp), worked by hand for small layer counts.

const GgufPlanModel kEightLayers{"llama", 8, 32, 8, false};

DType type(GgufFileType f, const std::string& name, Shape shape = {4096, 4096},
           const GgufPlanModel& m = kEightLayers) {
  return gguf_tensor_type(f, m, name, shape);
}

TEST(GgufQuantPlan, NamesRoundTrip) {
  for (const char* n : {"Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "F16", "F32"})
    EXPECT_EQ(gguf_file_type_name(*gguf_file_type_from_name(n)), n);
  EXPECT_EQ(gguf_file_type_from_name("q4_k_m"), GgufFileType::Q4_K_M);
  EXPECT_FALSE(gguf_file_type_from_name("Q4_K_S"));
  EXPECT_FALSE(gguf_file_type_from_name("IQ2_XS"));
  EXPECT_EQ(uint32_t(GgufFileType::Q4_K_M), 15u);  // general.file_type, as llama.cpp numbers it
}

// use_more_bits(i, 8): i < 1, i >= 7, or (i - 1) % 3 == 2 → layers 0, 3, 6, 7.
TEST(GgufQuantPlan, Q4KMGivesSomeLayersQ6K) {
  for (int i = 0; i < 8; i++) {
    const bool more = i == 0 || i == 3 || i == 6 || i == 7;
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "attn_v.weight"), more ? DType::Q6_K : DType::Q4_K)
        << i;
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "ffn_down.weight"), more ? DType::Q6_K : DType::Q4_K)
        << i;
    EXPECT_EQ(type(GgufFileType::Q5_K_M, b + "ffn_down.weight"), more ? DType::Q6_K : DType::Q5_K)
        << i;
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "attn_q.weight"), DType::Q4_K);
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "ffn_up.weight"), DType::Q4_K);
    EXPECT_EQ(type(GgufFileType::Q4_0, b + "attn_v.weight"), DType::Q4_0);
    // Stacked experts [E, N, K]: down as ffn_down, gate and up as the base type.
    const Shape experts{8, 1024, 4096};
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "ffn_down_exps.weight", experts),
              more ? DType::Q6_K : DType::Q4_K)
        << i;
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "ffn_gate_exps.weight", experts), DType::Q4_K);
    EXPECT_EQ(type(GgufFileType::Q4_K_M, b + "ffn_gate_inp.weight", {8, 4096}), DType::F32);
  }
}

TEST(GgufQuantPlan, OutputAndEmbedding) {
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "output.weight"), DType::Q6_K);
  EXPECT_EQ(type(GgufFileType::Q4_0, "output.weight"), DType::Q6_K);
  EXPECT_EQ(type(GgufFileType::Q8_0, "output.weight"), DType::Q8_0);
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "token_embd.weight"), DType::Q4_K);
  GgufPlanModel tied = kEightLayers;
  tied.tied = true;  // the embedding is the output too: quantized as the output
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "token_embd.weight", {4096, 4096}, tied), DType::Q6_K);
  EXPECT_EQ(type(GgufFileType::Q8_0, "token_embd.weight", {4096, 4096}, tied), DType::Q8_0);
  // Rows that are not whole blocks of the file's type: Q8_0.
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "output.weight", {512, 288}), DType::Q8_0);
}

TEST(GgufQuantPlan, OneDimensionalAndNormsStayF32) {
  for (GgufFileType f : {GgufFileType::F16, GgufFileType::Q4_K_M, GgufFileType::Q8_0}) {
    EXPECT_EQ(type(f, "blk.0.attn_norm.weight", {4096}), DType::F32);
    EXPECT_EQ(type(f, "blk.0.attn_q.bias", {4096}), DType::F32);
    EXPECT_EQ(type(f, "rope_freqs.weight", {64}), DType::F32);
    EXPECT_EQ(type(f, "blk.0.attn_q_norm.weight", {128}), DType::F32);
  }
  EXPECT_EQ(type(GgufFileType::F16, "blk.0.attn_q.weight"), DType::F16);
  EXPECT_EQ(type(GgufFileType::F32, "output.weight"), DType::F32);
}

// tensor_type_fallback: rows of 384 are not whole 256-blocks.
TEST(GgufQuantPlan, FallbackForRowsNotWholeBlocks) {
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.1.attn_output.weight", {256, 384}), DType::Q5_0);
  EXPECT_EQ(type(GgufFileType::Q5_K_M, "blk.1.attn_output.weight", {256, 384}), DType::Q5_1);
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.0.attn_v.weight", {256, 384}), DType::Q8_0);  // Q6_K's
  EXPECT_EQ(type(GgufFileType::Q6_K, "blk.1.ffn_up.weight", {256, 384}), DType::Q8_0);
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.1.ffn_up.weight", {256, 48}), DType::F16);
  EXPECT_EQ(type(GgufFileType::Q8_0, "blk.1.ffn_up.weight", {256, 48}), DType::F16);
}

// A 70B-shaped llama (80 layers, GQA): the attn_v use_more_bits leaves at Q4_K go to Q5_K.
TEST(GgufQuantPlan, SeventyBAttnVIsQ5K) {
  const GgufPlanModel m{"llama", 80, 64, 8, false};
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.0.attn_v.weight", {1024, 8192}, m), DType::Q6_K);
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.11.attn_v.weight", {1024, 8192}, m), DType::Q5_K);
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.11.ffn_down.weight", {8192, 28672}, m), DType::Q4_K);
  const GgufPlanModel mha{"llama", 80, 64, 64, false};  // 65B: no
  EXPECT_EQ(type(GgufFileType::Q4_K_M, "blk.11.attn_v.weight", {8192, 8192}, mha), DType::Q4_K);
}

}  // namespace gguf_model_test
}  // namespace tandem
