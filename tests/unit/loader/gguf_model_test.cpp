// GgufModel: a single file, and split models (NAME-0000K-of-0000N.gguf) given their first
// shard, with every way a set of shards can be inconsistent.
#include "loader/gguf_model.h"

#include <gtest/gtest.h>

#include "loader/gguf_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace {

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

}  // namespace
}  // namespace tandem
