// GgufFile over llama.cpp's own files (the oracle's F32, Q8_0 and Q4_K_M llama) and over
// files written by GgufWriter: header, every metadata value type, tensor infos, offsets and
// the bytes the views point at. GgufWriter's generated (streamed) tensors.
#include "loader/gguf_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include "core/error.h"
#include "loader/gguf_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace gguf_file_test {

namespace fs = std::filesystem;
using test::TempDir;

fs::path oracle_gguf(const std::string& name) {
  return fs::path(TANDEM_TEST_DATA) / "oracle" / "gguf" / name;
}

float f16_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

TEST(GgufFile, ReadsTheOracleF32File) {
  auto f = GgufFile::open(oracle_gguf("llama-F32.gguf"));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  const GgufMetadata& m = f->metadata();
  EXPECT_EQ(m.require_string("general.architecture"), "llama");
  EXPECT_EQ(m.require_int("llama.embedding_length"), 256);
  EXPECT_EQ(m.require_int("llama.block_count"), 1);
  EXPECT_EQ(m.require_int("llama.attention.head_count_kv"), 2);
  EXPECT_FLOAT_EQ(float(*m.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(m.find("tokenizer.ggml.tokens")->as_strings("tokens").size(), 512u);
  EXPECT_EQ(m.find("tokenizer.ggml.token_type")->as_ints("types")[2], 3);  // <|im_end|>: CONTROL
  EXPECT_FALSE(m.has("no.such.key"));

  // 1 layer: rope_freqs, token_embd, 9 per-layer tensors, output_norm, output.
  ASSERT_EQ(f->tensors().size(), 13u);
  const GgufTensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dtype, DType::F32);
  EXPECT_EQ(embd->shape, (Shape{512, 256}));  // [vocab, hidden]: ne0 = 256 is the row
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->shape, (Shape{256, 512}));
  EXPECT_EQ(f->find_tensor("blk.0.attn_k.weight")->shape, (Shape{128, 256}));
  EXPECT_EQ(f->find_tensor("rope_freqs.weight")->shape, (Shape{32}));
  // llama.cpp lays the tensors out back to back, each padded to the alignment, and the file
  // ends with the last one.
  uint64_t expected = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.offset, expected) << t.name;
    EXPECT_EQ(t.nbytes, uint64_t(t.shape.numel()) * 4) << t.name;
    expected = (t.offset + t.nbytes + 31) / 32 * 32;
  }
  EXPECT_EQ(f->data_offset() + expected, f->file_size());
  Tensor t = f->tensor(*embd);
  EXPECT_EQ(t.storage.get() != nullptr, true);
  std::string raw = test::read_bytes(oracle_gguf("llama-F32.gguf"));
  EXPECT_EQ(std::memcmp(t.data, raw.data() + f->data_offset() + embd->offset, embd->nbytes), 0);
}

// Q8_0's blocks are 32 values: an f16 scale d then 32 int8 q, value = d·q. Dequantized by
// hand they must be the F32 file's values to within half a step (plus d's rounding to f16,
// up to 127 · 2^-11 steps): the views are the right bytes of the right tensors.
TEST(GgufFile, Q8_0BlocksDequantizeToTheF32Values) {
  auto q = GgufFile::open(oracle_gguf("llama-Q8_0.gguf"));
  auto f = GgufFile::open(oracle_gguf("llama-F32.gguf"));
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "output.weight"}) {
    const GgufTensorInfo* qi = q->find_tensor(name);
    ASSERT_NE(qi, nullptr) << name;
    EXPECT_EQ(qi->dtype, DType::Q8_0) << name;
    EXPECT_EQ(qi->nbytes, uint64_t(qi->shape.numel() / 32 * 34)) << name;
    Tensor qt = q->tensor(*qi), ft = f->tensor(*f->find_tensor(name));
    ASSERT_EQ(qt.shape, ft.shape);
    const auto* blocks = static_cast<const std::byte*>(qt.data);
    double worst = 0;
    for (int64_t b = 0; b < qt.numel() / 32; b++) {
      const std::byte* block = blocks + b * 34;
      const float d = f16_at(block);
      for (int k = 0; k < 32; k++) {
        const float v = d * float(int8_t(block[2 + k]));
        const float want = ft.ptr<float>()[b * 32 + k];
        worst = std::max(worst, double(std::fabs(v - want)) / (double(d) + 1e-30));
      }
    }
    EXPECT_LE(worst, 0.5 + 127.0 / 2048 + 1e-3) << name;
    EXPECT_GT(worst, 0.3) << name;  // the bound is not loose: rounding does reach it
  }
}

TEST(GgufFile, Q4_K_MFileHasItsMixOfTypes) {
  auto q = GgufFile::open(oracle_gguf("llama-Q4_K_M.gguf"));
  auto f = GgufFile::open(oracle_gguf("llama-F32.gguf"));
  EXPECT_EQ(q->metadata().require_int("general.file_type"), 15);
  auto type_of = [&](const char* n) { return q->find_tensor(n)->dtype; };
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.0.attn_k.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.0.attn_v.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.0.ffn_gate.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.0.ffn_down.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("output.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.0.attn_norm.weight"), DType::F32);
  const GgufTensorInfo* down = q->find_tensor("blk.0.ffn_down.weight");
  EXPECT_EQ(down->shape, (Shape{256, 512}));
  EXPECT_EQ(down->nbytes, 256u * 2 * 210);  // two 256-value super-blocks per row
  // Norms stay f32: the same bytes as in the F32 file.
  for (const char* n : {"blk.0.attn_norm.weight", "output_norm.weight", "rope_freqs.weight"}) {
    Tensor a = q->tensor(*q->find_tensor(n)), b = f->tensor(*f->find_tensor(n));
    ASSERT_EQ(a.nbytes(), b.nbytes()) << n;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << n;
  }
  Tensor qv = q->tensor(*q->find_tensor("blk.0.attn_v.weight"));
  EXPECT_EQ(qv.dtype, DType::Q6_K);
  EXPECT_EQ(qv.nbytes(), 128u * 210);
}

TEST(GgufFile, WriterRoundTripsEveryValueType) {
  TempDir dir;
  GgufWriter w;
  w.add_u32("a.u32", 7);
  w.add_i32("a.i32", -3);
  w.add_u64("a.u64", uint64_t(1) << 40);
  w.add_f32("a.f32", 0.25f);
  w.add_bool("a.bool", true);
  w.add_string("a.str", "héllo");
  w.add_strings("a.strs", {"x", "", "yz"});
  w.add_i32s("a.i32s", {1, -2, 3});
  w.add_f32s("a.f32s", {0.5f, -1.5f});
  // An array of two arrays: [u8 1, 2] and [string "q"].
  std::string nested = GgufWriter::encode_array_header(GgufType::Array, 2) +
                       GgufWriter::encode_array_header(GgufType::U8, 2) + std::string("\x01\x02", 2) +
                       GgufWriter::encode_array_header(GgufType::String, 1) +
                       GgufWriter::encode_string("q");
  w.add_raw("a.nested", GgufType::Array, nested);
  std::string bytes(6 * 4, '\0');
  for (int i = 0; i < 6; i++) {
    float v = float(i) + 0.5f;
    std::memcpy(&bytes[size_t(i) * 4], &v, 4);
  }
  w.add_tensor("t", DType::F32, {2, 3}, bytes);
  w.add_tensor("u", DType::F16, {4}, std::string(8, '\x3c'));
  w.write(dir / "x.gguf");

  auto f = GgufFile::open(dir / "x.gguf");
  const GgufMetadata& m = f->metadata();
  EXPECT_EQ(m.entries().size(), 10u);
  EXPECT_EQ(m.entries()[0].key, "a.u32");  // file order
  EXPECT_EQ(*m.get_int("a.u32"), 7);
  EXPECT_EQ(*m.get_int("a.i32"), -3);
  EXPECT_EQ(*m.get_int("a.u64"), int64_t(1) << 40);
  EXPECT_EQ(*m.get_float("a.f32"), 0.25);
  EXPECT_EQ(*m.get_float("a.u32"), 7.0);  // integers read as numbers
  EXPECT_TRUE(*m.get_bool("a.bool"));
  EXPECT_EQ(*m.get_string("a.str"), "héllo");
  EXPECT_EQ(m.find("a.strs")->as_strings("s"), (std::vector<std::string_view>{"x", "", "yz"}));
  EXPECT_EQ(m.find("a.i32s")->as_ints("s"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(m.find("a.f32s")->as_floats("s"), (std::vector<float>{0.5f, -1.5f}));
  std::vector<GgufValue> outer = m.find("a.nested")->elements("n");
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(outer[0].as_ints("n0"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(outer[1].as_strings("n1"), (std::vector<std::string_view>{"q"}));
  EXPECT_EQ(m.find("a.nested")->type_description(), "array of 2 array");

  Tensor t = f->tensor(*f->find_tensor("t"));
  EXPECT_EQ(t.shape, (Shape{2, 3}));
  EXPECT_EQ(t.ptr<float>()[5], 5.5f);
  Tensor u = f->tensor(*f->find_tensor("u"));
  EXPECT_EQ(u.dtype, DType::F16);
  EXPECT_EQ(f->find_tensor("u")->offset % 32, 0u);
}

TEST(GgufFile, TypedReadsNameTheKeyAndTheTypes) {
  TempDir dir;
  GgufWriter w;
  w.add_string("k.s", "text");
  w.add_u64("k.big", ~uint64_t(0));
  w.add_i32s("k.ints", {1});
  w.write(dir / "x.gguf");
  auto f = GgufFile::open(dir / "x.gguf");
  const GgufMetadata& m = f->metadata();
  std::string e = test::error_of([&] { m.get_int("k.s"); });
  EXPECT_CONTAINS(e, "metadata 'k.s' is string, expected an integer");
  EXPECT_CONTAINS(test::error_of([&] { m.get_int("k.big"); }), "18446744073709551615");
  EXPECT_CONTAINS(test::error_of([&] { m.find("k.ints")->as_strings("'k.ints'"); }),
                  "'k.ints' is array of 1 i32, expected an array of strings");
  EXPECT_CONTAINS(test::error_of([&] { m.require_int("k.missing"); }),
                  "required metadata 'k.missing' is missing");
}

TEST(GgufFile, DetectsGgufByItsMagic) {
  TempDir dir;
  GgufWriter().write(dir / "a.gguf");
  test::write_bytes(dir / "b.bin", "not gguf");
  EXPECT_TRUE(is_gguf_file(dir / "a.gguf"));
  EXPECT_FALSE(is_gguf_file(dir / "b.bin"));
  EXPECT_FALSE(is_gguf_file(dir.path()));
  EXPECT_FALSE(is_gguf_file(dir / "missing.gguf"));
}

}  // namespace gguf_file_test
}  // namespace tandem

namespace tandem {
namespace gguf_file_test {

// The fuzz target's seeds (tests/fuzz/corpus/gguf) are files the reader accepts, so fuzzing
// starts from inside the format.
TEST(GgufFile, FuzzSeedsAreValidFiles) {
  int seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(
           std::filesystem::path(TANDEM_TEST_DATA) / ".." / "fuzz" / "corpus" / "gguf")) {
    EXPECT_NO_THROW(GgufFile::open(e.path())) << e.path();
    seeds++;
  }
  EXPECT_GE(seeds, 3);
}

// GgufWriter's generated tensors (RowFill): the same file as the tensor held whole, rows asked
// for in order, in whole row groups, in chunks of bounded size; write() leaves no partial file.

std::string rows_bytes(int64_t rows, int64_t cols) {
  std::string s(size_t(rows * cols) * 4, '\0');
  float* f = reinterpret_cast<float*>(s.data());
  for (int64_t i = 0; i < rows * cols; i++) f[i] = float(i % 977) * 0.5f;
  return s;
}

TEST(GgufWriterStream, GeneratedTensorIsTheHeldOne) {
  const int64_t rows = 3000, cols = 1024;  // 12 MB of f32: more than one chunk
  const std::string data = rows_bytes(rows, cols);
  GgufWriter held, streamed;
  for (GgufWriter* w : {&held, &streamed}) {
    w->add_string("general.architecture", "llama");
    w->add_tensor("a", DType::F32, {5}, std::string(20, '\x01'));
  }
  held.add_tensor("t", DType::F32, {rows, cols}, data);
  std::vector<std::pair<int64_t, int64_t>> calls;
  streamed.add_tensor(
      "t", DType::F32, {rows, cols},
      [&](void* dst, int64_t first, int64_t count) {
        calls.emplace_back(first, count);
        std::memcpy(dst, data.data() + size_t(first * cols) * 4, size_t(count * cols) * 4);
      },
      /*row_group=*/8);
  EXPECT_EQ(streamed.bytes(), held.bytes());
  ASSERT_GT(calls.size(), 1u);
  int64_t next = 0;
  for (auto [first, count] : calls) {
    EXPECT_EQ(first, next);
    EXPECT_EQ(first % 8, 0);
    EXPECT_LE(size_t(count * cols) * 4, GgufWriter::kChunkBytes);
    next = first + count;
  }
  EXPECT_EQ(next, rows);
}

TEST(GgufWriterStream, BlockRowsAndGroupsAreChecked) {
  GgufWriter w;
  auto none = [](void*, int64_t, int64_t) {};
  EXPECT_THROW(w.add_tensor("q", DType::Q4_K, {4, 100}, none), Error);    // 100 % 256
  EXPECT_THROW(w.add_tensor("g", DType::F32, {10, 16}, none, 4), Error);  // 10 % 4
  w.add_tensor("ok", DType::Q8_0, {4, 64},
               [](void* dst, int64_t, int64_t count) { std::memset(dst, 0, size_t(count) * 68); });
  auto file = GgufFile::from_bytes(w.bytes(), "ok.gguf");
  EXPECT_EQ(file->tensors()[0].nbytes, 4u * 68u);
}

TEST(GgufWriterStream, AFailingFillLeavesNoFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tandem-writer-" + std::to_string(::getpid()) + ".gguf");
  GgufWriter w;
  w.add_tensor("t", DType::F32, {4, 4},
               [](void*, int64_t, int64_t) { throw Error("no more data"); });
  EXPECT_THROW(w.write(path), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(path).concat(".tmp")));
  GgufWriter ok;
  ok.add_tensor("t", DType::F32, {2}, std::string(8, '\0'));
  ok.write(path);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(path).concat(".tmp")));
  std::filesystem::remove(path);
}

}  // namespace gguf_file_test
}  // namespace tandem
