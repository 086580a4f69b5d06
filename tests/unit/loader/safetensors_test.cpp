// SafetensorsFile reading hand-built files, and SafetensorsWriter -> SafetensorsFile round
// trips for every dtype tandem stores.
#include "loader/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "loader/safetensors_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace safetensors_test {

using test::TempDir;

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  std::vector<T> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data, t.nbytes());
  return v;
}

template <typename T>
SafetensorsWriter::Fill fill_with(std::vector<T> v) {
  return [v](void* dst, size_t bytes) {
    ASSERT_EQ(bytes, v.size() * sizeof(T));
    std::memcpy(dst, v.data(), bytes);
  };
}

TEST(Safetensors, ReadsHandBuiltFile) {
  TempDir dir;
  // Header padded with spaces so the data starts 8-byte aligned.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I32","shape":[1,2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data =
      bytes_of(std::vector<float>{1.5f, -2.0f}) + bytes_of(std::vector<int32_t>{7, -3});
  test::write_bytes(dir / "x.safetensors", test::raw_safetensors(header, data));

  auto file = SafetensorsFile::open(dir / "x.safetensors");
  EXPECT_EQ(file->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(file->has("a"));
  EXPECT_FALSE(file->has("c"));
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->path(), dir / "x.safetensors");

  Tensor a = file->tensor("a");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (Shape{2}));
  EXPECT_EQ(values_of<float>(a), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_NE(a.storage, nullptr);
  Tensor b = file->tensor("b");
  EXPECT_EQ(b.dtype, DType::I32);
  EXPECT_EQ(b.shape, (Shape{1, 2}));
  EXPECT_EQ(values_of<int32_t>(b), (std::vector<int32_t>{7, -3}));
  // Zero copy: both views point into one mapping, 8 bytes apart as the offsets say.
  EXPECT_EQ(static_cast<char*>(b.data) - static_cast<char*>(a.data), 8);
  EXPECT_EQ(a.storage, b.storage);
}

TEST(Safetensors, TensorKeepsMappingAlive) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("w", DType::F32, {3}, fill_with(std::vector<float>{1, 2, 3}));
  w.write(dir / "m.safetensors");
  Tensor t = SafetensorsFile::open(dir / "m.safetensors")->tensor("w");  // file object gone
  EXPECT_EQ(values_of<float>(t), (std::vector<float>{1, 2, 3}));
}

TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  TempDir dir;
  std::vector<float> f32{0.5f, -1.25f, 3.0f, 1e-7f, -0.0f, 65504.f};
  std::vector<uint16_t> bf16, f16;
  for (float v : {1.f, -2.5f, 0.1f, 3e38f}) bf16.push_back(f32_to_bf16(v));
  for (float v : {1.f, -0.333f, 6e-5f}) f16.push_back(f32_to_f16(v));
  std::vector<int32_t> i32{0, -1, 2147483647, -2147483647 - 1};

  SafetensorsWriter w;
  w.add("f32", DType::F32, {2, 3}, fill_with(f32));
  w.add("bf16", DType::BF16, {4}, fill_with(bf16));
  w.add("f16", DType::F16, {3, 1}, fill_with(f16));
  w.add("i32", DType::I32, {2, 1, 2}, fill_with(i32));
  w.add("scalar", DType::F32, {}, fill_with(std::vector<float>{42.f}));
  w.add("empty", DType::BF16, {0, 4}, [](void*, size_t bytes) { FAIL() << "no bytes to fill"; });
  EXPECT_EQ(w.num_tensors(), 6u);
  EXPECT_EQ(w.total_bytes(), 24u + 8 + 6 + 16 + 4);
  w.write(dir / "all.safetensors", {{"format", "pt"}, {"note", "round trip"}});
  EXPECT_FALSE(std::filesystem::exists(dir / "all.safetensors.tmp"));

  auto file = SafetensorsFile::open(dir / "all.safetensors");
  EXPECT_EQ(file->names(),
            (std::vector<std::string>{"bf16", "empty", "f16", "f32", "i32", "scalar"}));
  EXPECT_EQ(file->metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}, {"note", "round trip"}}));
  EXPECT_EQ(file->tensor("f32").shape, (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(file->tensor("f32")), f32);
  EXPECT_EQ(file->tensor("bf16").dtype, DType::BF16);
  EXPECT_EQ(values_of<uint16_t>(file->tensor("bf16")), bf16);
  EXPECT_EQ(file->tensor("f16").dtype, DType::F16);
  EXPECT_EQ(file->tensor("f16").shape, (Shape{3, 1}));
  EXPECT_EQ(values_of<uint16_t>(file->tensor("f16")), f16);
  EXPECT_EQ(file->tensor("i32").dtype, DType::I32);
  EXPECT_EQ(file->tensor("i32").shape, (Shape{2, 1, 2}));
  EXPECT_EQ(values_of<int32_t>(file->tensor("i32")), i32);
  EXPECT_EQ(file->tensor("scalar").ndim(), 0);
  EXPECT_EQ(values_of<float>(file->tensor("scalar")), std::vector<float>{42.f});
  EXPECT_EQ(file->tensor("empty").shape, (Shape{0, 4}));
  EXPECT_EQ(file->tensor("empty").nbytes(), 0u);
}

// The layout Hugging Face writes: padded header, metadata first, 4-byte types first,
// contiguous aligned data. Checked on the raw bytes, not through our reader.
TEST(Safetensors, WriterLayoutMatchesHuggingFace) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("z.bf16", DType::BF16, {3}, fill_with(std::vector<uint16_t>{1, 2, 3}));
  w.add("a.f16", DType::F16, {1}, fill_with(std::vector<uint16_t>{9}));
  w.add("y.f32", DType::F32, {2}, fill_with(std::vector<float>{1, 2}));
  w.add("b.i32", DType::I32, {1}, fill_with(std::vector<int32_t>{5}));
  w.write(dir / "l.safetensors", {{"format", "pt"}});

  std::string raw = test::read_bytes(dir / "l.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | uint8_t(raw[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  std::string header = raw.substr(8, n);
  EXPECT_EQ(header.rfind(R"({"__metadata__":{"format":"pt"},)", 0), 0u) << header;
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
  auto j = nlohmann::ordered_json::parse(header);
  std::vector<std::string> order;
  for (const auto& [k, v] : j.items()) order.push_back(k);
  EXPECT_EQ(order, (std::vector<std::string>{"__metadata__", "y.f32", "b.i32", "z.bf16", "a.f16"}));
  EXPECT_EQ(j["y.f32"]["data_offsets"], nlohmann::ordered_json::parse("[0, 8]"));
  EXPECT_EQ(j["b.i32"]["data_offsets"], nlohmann::ordered_json::parse("[8, 12]"));
  EXPECT_EQ(j["z.bf16"]["data_offsets"], nlohmann::ordered_json::parse("[12, 18]"));
  EXPECT_EQ(j["a.f16"]["data_offsets"], nlohmann::ordered_json::parse("[18, 20]"));
  EXPECT_EQ(j["z.bf16"]["shape"], nlohmann::ordered_json::parse("[3]"));
  EXPECT_EQ(raw.size(), 8 + n + 20);
  float y1;
  std::memcpy(&y1, raw.data() + 8 + n + 4, 4);
  EXPECT_EQ(y1, 2.f);
}

TEST(Safetensors, UnalignedTensorIsCopiedToAlignedMemory) {
  TempDir dir;
  // An unpadded 61-byte header puts the f32 data at file offset 69: misaligned.
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append(61 - header.size(), ' ');
  test::write_bytes(dir / "u.safetensors",
                    test::raw_safetensors(header, bytes_of(std::vector<float>{3.5f, -1.f})));
  Tensor t = SafetensorsFile::open(dir / "u.safetensors")->tensor("w");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u);
  EXPECT_EQ(values_of<float>(t), (std::vector<float>{3.5f, -1.f}));
}

TEST(Safetensors, WriteReplacesExistingFile) {
  TempDir dir;
  test::write_bytes(dir / "m.safetensors", "old contents, not safetensors");
  SafetensorsWriter w;
  w.add("x", DType::I32, {1}, fill_with(std::vector<int32_t>{11}));
  w.write(dir / "m.safetensors");
  EXPECT_EQ(values_of<int32_t>(SafetensorsFile::open(dir / "m.safetensors")->tensor("x")),
            std::vector<int32_t>{11});
}

TEST(Safetensors, FailedFillLeavesNoFile) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("x", DType::F32, {4}, [](void*, size_t) { fail("fill broke"); });
  EXPECT_NE(test::error_of([&] { w.write(dir / "m.safetensors"); }).find("fill broke"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "m.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "m.safetensors.tmp"));
}

// Chunked fills see consecutive whole-element pieces; whole fills and chunked fills mix.
TEST(SafetensorsWriter, ChunkedAndWholeFillsMix) {
  TempDir dir;
  const int64_t big = 3 << 20;  // 12 MB of f32: several of the writer's chunks
  std::vector<std::pair<size_t, size_t>> calls;
  SafetensorsWriter w;
  w.add("a", DType::F32, {5}, fill_with(std::vector<float>{1, 2, 3, 4, 5}));
  w.add_chunked("b", DType::F32, {big / 4, 4}, [&](void* dst, size_t offset, size_t bytes) {
    calls.emplace_back(offset, bytes);
    for (size_t k = 0; k < bytes / 4; k++) static_cast<float*>(dst)[k] = float(offset / 4 + k);
  });
  w.add_chunked("c", DType::BF16, {7}, [](void* dst, size_t offset, size_t bytes) {
    for (size_t k = 0; k < bytes / 2; k++)
      static_cast<uint16_t*>(dst)[k] = f32_to_bf16(float(offset / 2 + k) + 0.5f);
  });
  w.add("d", DType::F16, {3}, fill_with(std::vector<uint16_t>{f32_to_f16(-1.f), 0, 1}));
  w.write(dir / "mix.safetensors");

  ASSERT_GT(calls.size(), 1u);
  size_t next = 0;
  for (auto [offset, bytes] : calls) {
    EXPECT_EQ(offset, next);
    EXPECT_EQ(bytes % 4, 0u);
    next = offset + bytes;
  }
  EXPECT_EQ(next, size_t(big) * 4);

  auto file = SafetensorsFile::open(dir / "mix.safetensors");
  EXPECT_EQ(values_of<float>(file->tensor("a")), (std::vector<float>{1, 2, 3, 4, 5}));
  Tensor b = file->tensor("b");
  EXPECT_EQ(b.shape, (Shape{big / 4, 4}));
  for (int64_t k = 0; k < big; k++) ASSERT_EQ(b.ptr<float>()[k], float(k)) << k;
  std::vector<uint16_t> c = values_of<uint16_t>(file->tensor("c"));
  for (size_t k = 0; k < 7; k++) EXPECT_EQ(bf16_to_f32(c[k]), float(k) + 0.5f);
  EXPECT_EQ(values_of<uint16_t>(file->tensor("d")),
            (std::vector<uint16_t>{f32_to_f16(-1.f), 0, 1}));
}

TEST(SafetensorsWriter, AddTensorCopiesItsBytes) {
  TempDir dir;
  Tensor t = Tensor::empty_host(DType::I32, {2, 3});
  for (int k = 0; k < 6; k++) t.ptr<int32_t>()[k] = 10 * k - 7;
  SafetensorsWriter w;
  w.add("t", t);
  w.write(dir / "t.safetensors");
  Tensor r = SafetensorsFile::open(dir / "t.safetensors")->tensor("t");
  EXPECT_EQ(r.dtype, DType::I32);
  EXPECT_EQ(r.shape, (Shape{2, 3}));
  EXPECT_EQ(values_of<int32_t>(r), (std::vector<int32_t>{-7, 3, 13, 23, 33, 43}));
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  SafetensorsWriter w;
  auto none = [](void*, size_t) {};
  w.add("x", DType::F32, {1}, none);
  EXPECT_NE(test::error_of([&] { w.add("x", DType::F32, {1}, none); }).find("'x' added twice"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              w.add("n", DType::F32, {2, -3}, none);
            }).find("negative dim -3"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              w.add("__metadata__", DType::F32, {1}, none);
            }).find("invalid tensor name"),
            std::string::npos);
}

}  // namespace safetensors_test
}  // namespace tandem
