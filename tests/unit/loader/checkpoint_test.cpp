// Checkpoint over sharded folders written by SafetensorsWriter, over the oracle model
// folders, and every way a folder can be inconsistent.
#include "loader/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loader/safetensors_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace checkpoint_test {

namespace fs = std::filesystem;
using test::TempDir;

// A tensor whose element k is `base + k`, so every tensor's contents are distinct.
void add_iota(SafetensorsWriter& w, const std::string& name, int64_t n, float base) {
  w.add(name, DType::F32, {n}, [n, base](void* dst, size_t bytes) {
    ASSERT_EQ(bytes, size_t(n) * 4);
    for (int64_t k = 0; k < n; k++) static_cast<float*>(dst)[k] = base + float(k);
  });
}

void expect_iota(const Tensor& t, int64_t n, float base) {
  ASSERT_EQ(t.dtype, DType::F32);
  ASSERT_EQ(t.shape, (Shape{n}));
  for (int64_t k = 0; k < n; k++) ASSERT_EQ(t.ptr<float>()[k], base + float(k)) << k;
}

// One valid single-tensor file.
void write_one(const fs::path& path, const std::string& name, float base) {
  SafetensorsWriter w;
  add_iota(w, name, 4, base);
  w.write(path);
}

TEST(Checkpoint, ShardedWriteReadsBackThroughTheIndex) {
  TempDir dir;
  SafetensorsWriter w;
  // 400, 400, 400, 1200, 40 bytes with 1000-byte shards: [t0 t1] [t2] [t3] [t4].
  add_iota(w, "t0", 100, 0);
  add_iota(w, "t1", 100, 1000);
  add_iota(w, "t2", 100, 2000);
  add_iota(w, "t3", 300, 3000);
  add_iota(w, "t4", 10, 4000);
  std::vector<fs::path> files = w.write_sharded(dir.path(), 1000);
  std::vector<fs::path> expected;
  for (int k = 1; k <= 4; k++)
    expected.push_back(dir / fmt::format("model-0000{}-of-00004.safetensors", k));
  expected.push_back(dir / "model.safetensors.index.json");
  EXPECT_EQ(files, expected);

  auto index = nlohmann::json::parse(test::read_bytes(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 2440);
  EXPECT_EQ(index["weight_map"]["t1"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["t3"], "model-00003-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"].size(), 5u);

  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"t0", "t1", "t2", "t3", "t4"}));
  EXPECT_EQ(c.files().size(), 4u);
  EXPECT_EQ(c.dir(), dir.path());
  expect_iota(c.get("t0"), 100, 0);
  expect_iota(c.get("t1"), 100, 1000);
  expect_iota(c.get("t2"), 100, 2000);
  expect_iota(c.get("t3"), 300, 3000);
  expect_iota(c.get("t4"), 10, 4000);
  EXPECT_EQ(c.file_of("t4").path(), dir / "model-00004-of-00004.safetensors");
  EXPECT_EQ(c.file_of("t3").metadata().at("format"), "pt");
}

TEST(Checkpoint, EverythingInOneShardWritesModelSafetensors) {
  TempDir dir;
  SafetensorsWriter w;
  add_iota(w, "a", 8, 1);
  add_iota(w, "b", 8, 2);
  EXPECT_EQ(w.write_sharded(dir.path(), 64), std::vector<fs::path>{dir / "model.safetensors"});
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  Checkpoint c = Checkpoint::open(dir.path());
  expect_iota(c.get("b"), 8, 2);
}

TEST(Checkpoint, WriteShardedRefusesAFolderWithOtherWeights) {
  TempDir dir;
  write_one(dir / "other.safetensors", "x", 0);
  SafetensorsWriter w;
  add_iota(w, "a", 8, 1);
  std::string e = test::error_of([&] { w.write_sharded(dir.path(), 1 << 20); });
  EXPECT_CONTAINS(e, "other.safetensors");
  EXPECT_CONTAINS(e, "empty folder");
}

TEST(Checkpoint, WithoutIndexOpensEveryFile) {
  TempDir dir;
  write_one(dir / "b.safetensors", "second", 20);
  write_one(dir / "a.safetensors", "first", 10);
  test::write_bytes(dir / "config.json", "{}");
  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"first", "second"}));
  ASSERT_EQ(c.files().size(), 2u);
  EXPECT_EQ(c.files()[0]->path(), dir / "a.safetensors");  // sorted by file name
  expect_iota(c.get("first"), 4, 10);
  expect_iota(c.get("second"), 4, 20);
}

// Shapes the oracle configs imply, checked on every architecture's real checkpoint.
TEST(Checkpoint, OracleFolders) {
  const fs::path root = fs::path(TANDEM_TEST_DATA) / "oracle";
  int num_archs = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!entry.is_directory()) continue;  // the fixture generators sit beside the folders
    if (entry.path().filename() == "fp8") continue;  // FP8 fixtures: tests/golden/fp8_oracle_test.cpp
    if (entry.path().filename() == "lora") continue;  // PEFT adapters: tests/golden/lora_oracle_test.cpp
    if (entry.path().filename() == "gguf") continue;  // llama.cpp files: tests/golden/gguf_oracle_test.cpp
    if (entry.path().filename() == "vision") continue;  // multimodal: tests/golden/vision_*
    SCOPED_TRACE(entry.path().string());
    num_archs++;
    auto config = nlohmann::json::parse(test::read_bytes(entry.path() / "config.json"));
    if (config.contains("text_config")) config = config["text_config"];
    Checkpoint c = Checkpoint::open(entry.path());
    Tensor embed = c.get("model.embed_tokens.weight");
    EXPECT_EQ(embed.dtype, DType::BF16);
    EXPECT_EQ(embed.shape,
              (Shape{config["vocab_size"].get<int64_t>(), config["hidden_size"].get<int64_t>()}));
    auto weights = SafetensorsFile::open(entry.path() / "model.safetensors");
    for (const std::string& name : weights->names()) EXPECT_TRUE(c.has(name)) << name;
  }
  EXPECT_GE(num_archs, 12);
}

TEST(Checkpoint, OracleLlamaTensors) {
  const fs::path dir = fs::path(TANDEM_TEST_DATA) / "oracle" / "llama";
  Checkpoint c = Checkpoint::open(dir);
  // hidden 64, 4 heads and 2 kv heads of head_dim 16, intermediate 128 (config.json).
  Tensor q = c.get("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.dtype, DType::BF16);
  EXPECT_EQ(q.shape, (Shape{64, 64}));
  EXPECT_EQ(c.get("model.layers.3.self_attn.k_proj.weight").shape, (Shape{32, 64}));
  EXPECT_EQ(c.get("model.layers.1.mlp.down_proj.weight").shape, (Shape{64, 128}));
  EXPECT_EQ(c.get("model.norm.weight").shape, (Shape{64}));
  // 4 layers × 9 tensors + embed + norm + lm_head.
  EXPECT_EQ(SafetensorsFile::open(dir / "model.safetensors")->names().size(), 39u);
  EXPECT_FALSE(c.has("model.layers.4.self_attn.q_proj.weight"));

  // The view's bytes are the file's bytes at 8 + header length + begin (read with ifstream).
  const SafetensorsFile& file = c.file_of("model.norm.weight");
  std::string raw = test::read_bytes(dir / "model.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | uint8_t(raw[size_t(i)]);
  const auto& e = file.entry("model.norm.weight");
  Tensor norm = c.get("model.norm.weight");
  EXPECT_EQ(std::memcmp(norm.data, raw.data() + 8 + n + e.begin, 128), 0);
}

TEST(CheckpointErrors, IndexNamesAMissingShard) {
  TempDir dir;
  write_one(dir / "model-00001-of-00002.safetensors", "a", 0);
  test::write_bytes(dir / "model.safetensors.index.json",
                    R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                       "b": "model-00002-of-00002.safetensors"}})");
  std::string e = test::error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_CONTAINS(e, "model.safetensors.index.json");
  EXPECT_CONTAINS(e, "shard 'model-00002-of-00002.safetensors'");
  EXPECT_CONTAINS(e, "tensor 'b'");
  EXPECT_CONTAINS(e, "missing");
}

TEST(CheckpointErrors, IndexNamesATensorAbsentFromItsShard) {
  TempDir dir;
  write_one(dir / "s1.safetensors", "a", 0);
  write_one(dir / "s2.safetensors", "b", 0);
  test::write_bytes(dir / "model.safetensors.index.json",
                    R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  std::string e = test::error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_CONTAINS(e, "tensor 'b' is listed in shard 's1.safetensors'");
  EXPECT_CONTAINS(e, (dir / "s1.safetensors").string());
}

TEST(CheckpointErrors, BrokenIndex) {
  TempDir dir;
  write_one(dir / "s1.safetensors", "a", 0);
  test::write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": )");
  EXPECT_CONTAINS(test::error_of([&] { Checkpoint::open(dir.path()); }), "not valid JSON");
  test::write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_CONTAINS(test::error_of([&] { Checkpoint::open(dir.path()); }),
                  "missing 'weight_map' object");
  test::write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"a": 3}})");
  EXPECT_CONTAINS(test::error_of([&] { Checkpoint::open(dir.path()); }),
                  "weight_map entry for tensor 'a'");
}

TEST(CheckpointErrors, BrokenShardNamesTheShard) {
  TempDir dir;
  test::write_bytes(dir / "s1.safetensors", "");
  test::write_bytes(dir / "model.safetensors.index.json",
                    R"({"weight_map": {"a": "s1.safetensors"}})");
  std::string e = test::error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_CONTAINS(e, (dir / "s1.safetensors").string());
  EXPECT_CONTAINS(e, "empty");
}

TEST(CheckpointErrors, DuplicateTensorAcrossFiles) {
  TempDir dir;
  write_one(dir / "a.safetensors", "w", 0);
  write_one(dir / "b.safetensors", "w", 1);
  std::string e = test::error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_CONTAINS(
      e, fmt::format("tensor 'w' appears in both {} and {}", (dir / "a.safetensors").string(),
                     (dir / "b.safetensors").string()));
}

TEST(CheckpointErrors, FolderWithoutWeights) {
  TempDir dir;
  test::write_bytes(dir / "config.json", "{}");
  std::string e = test::error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_CONTAINS(e, "no weights in " + dir.path().string());
}

TEST(CheckpointErrors, NotADirectory) {
  TempDir dir;
  EXPECT_CONTAINS(test::error_of([&] { Checkpoint::open(dir / "absent"); }),
                  (dir / "absent").string() + " is not a directory");
}

TEST(CheckpointErrors, GetOfAMissingTensor) {
  TempDir dir;
  write_one(dir / "model.safetensors", "w", 0);
  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_FALSE(c.has("v"));
  EXPECT_EQ(test::error_of([&] { c.get("v"); }),
            fmt::format("tensor 'v' not found in {}", dir.path().string()));
}

}  // namespace checkpoint_test
}  // namespace tandem
