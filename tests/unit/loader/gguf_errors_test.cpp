// Hostile and broken GGUF files: each is refused by GgufFile::open with a tandem::Error
// naming the file and what is wrong, before anything sized by a declared count is
// allocated (a count is checked against the bytes left in the file first, so a header that
// declares 2^60 of anything costs nothing).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <optional>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace gguf_errors_test {

using test::TempDir;

template <typename T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

std::string header(uint32_t version, uint64_t tensors, uint64_t metadata) {
  return "GGUF" + le(version) + le(tensors) + le(metadata);
}

class GgufErrors : public ::testing::Test {
 protected:
  // Writes `bytes` and returns the error opening them gives.
  std::string open_error(const std::string& bytes) {
    test::write_bytes(dir_ / "bad.gguf", bytes);
    std::string e = test::error_of([&] { GgufFile::open(dir_ / "bad.gguf"); });
    EXPECT_CONTAINS(e, "bad.gguf");
    return e;
  }
  std::string open_error(const GgufWriter& w) { return open_error(w.bytes()); }

  TempDir dir_;
};

TEST_F(GgufErrors, NotGgufOrTooShort) {
  EXPECT_CONTAINS(open_error(""), "not a GGUF file");
  EXPECT_CONTAINS(open_error("{\"json\": 1}"), "not a GGUF file");
  EXPECT_CONTAINS(open_error("GGUF\x03"), "too short for a GGUF header");
}

TEST_F(GgufErrors, Versions) {
  EXPECT_CONTAINS(open_error(header(1, 0, 0)), "GGUF version 1 is not supported");
  EXPECT_CONTAINS(open_error(header(4, 0, 0)), "unsupported GGUF version 4");
  EXPECT_CONTAINS(open_error(header(0x03000000, 0, 0)), "big-endian");
  EXPECT_NO_THROW(GgufFile::open([&] {
    test::write_bytes(dir_ / "v2.gguf", header(2, 0, 0));
    return dir_ / "v2.gguf";
  }()));
}

TEST_F(GgufErrors, LyingCounts) {
  const uint64_t huge = uint64_t(1) << 60;
  EXPECT_CONTAINS(open_error(header(3, huge, 0)), "declares 1152921504606846976 tensors");
  EXPECT_CONTAINS(open_error(header(3, 0, huge)), "declares 1152921504606846976 metadata entries");
  // Within the structural limit but more than the file can hold.
  EXPECT_CONTAINS(open_error(header(3, 1000, 0)), "hold at most 0");
  // An array of 2^60 u8, of 2^60 strings, of 2^60 arrays.
  for (GgufType t : {GgufType::U8, GgufType::String, GgufType::Array}) {
    GgufWriter w;
    w.add_raw("big", GgufType::Array, GgufWriter::encode_array_header(t, huge) + "xxxx");
    std::string e = open_error(w);
    EXPECT_CONTAINS(e, "metadata 'big' declares 1152921504606846976");
    EXPECT_CONTAINS(e, "hold at most");
  }
}

// Peak resident memory growth while `fn` runs (VmHWM, reset through /proc/self/clear_refs);
// nullopt where the kernel does not let the peak be reset.
template <typename Fn>
std::optional<int64_t> peak_growth(Fn&& fn) {
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

// Counts that would take gigabytes if believed cost nothing: the refusal comes first.
TEST_F(GgufErrors, LyingCountsAllocateNothing) {
  const uint64_t big = uint64_t(1) << 33;
  std::vector<std::string> files = {header(3, GgufFile::kMaxTensors, 0) + std::string(1 << 16, '\0'),
                                    header(3, 0, GgufFile::kMaxMetadata) + std::string(1 << 16, '\0')};
  for (GgufType t : {GgufType::U8, GgufType::String, GgufType::Array}) {
    GgufWriter w;
    w.add_raw("big", GgufType::Array, GgufWriter::encode_array_header(t, big) + std::string(1 << 16, '\0'));
    files.push_back(w.bytes());
  }
  for (const std::string& bytes : files) {
    std::string e;
    auto growth = peak_growth([&] { e = open_error(bytes); });
    EXPECT_CONTAINS(e, "hold at most");
    if (growth) {
      EXPECT_LT(*growth, int64_t(32) << 20) << e;
    }
  }
}

TEST_F(GgufErrors, StringsPastTheEnd) {
  GgufWriter w;
  w.add_raw("s", GgufType::String, le(uint64_t(1) << 40) + "abc");
  EXPECT_CONTAINS(open_error(w), "metadata 's' at offset 37 declares a string of 1099511627776 bytes, but the file has 3 left");
  // A key length of 2^62.
  EXPECT_CONTAINS(open_error(header(3, 0, 1) + le(uint64_t(1) << 62) + std::string(64, 'k')),
                  "key of metadata entry 0 at offset 24 declares a string of 4611686018427387904 bytes");
  // A key longer than any real one, though the file holds it.
  EXPECT_CONTAINS(open_error(header(3, 0, 1) + GgufWriter::encode_string(std::string(70000, 'k'))),
                  "declares a string of 70000 bytes (the limit is 65536)");
  // A string array whose third element runs past the end.
  GgufWriter a;
  a.add_raw("arr", GgufType::Array,
            GgufWriter::encode_array_header(GgufType::String, 3) + GgufWriter::encode_string("a") +
                GgufWriter::encode_string("b") + le(uint64_t(100)) + "c");
  EXPECT_CONTAINS(open_error(a), "metadata 'arr' at offset 69 declares a string of 100 bytes");
}

TEST_F(GgufErrors, BadKeysAndTypes) {
  GgufWriter dup;
  dup.add_u32("k", 1);
  dup.add_u32("k", 2);
  EXPECT_CONTAINS(open_error(dup), "metadata key 'k' appears twice");
  EXPECT_CONTAINS(open_error(header(3, 0, 1) + GgufWriter::encode_string("") + le(uint32_t(4)) +
                             le(uint32_t(1))),
                  "empty key");
  GgufWriter type13;
  type13.add_raw("t", GgufType(13), "x");
  EXPECT_CONTAINS(open_error(type13), "metadata 't' has an unknown value type 13");
  GgufWriter elem;
  elem.add_raw("t", GgufType::Array, le(uint32_t(99)) + le(uint64_t(0)));
  EXPECT_CONTAINS(open_error(elem), "array of unknown value type 99");
  // Arrays nested deeper than tandem walks.
  std::string deep;
  for (int i = 0; i < 20; i++) deep += GgufWriter::encode_array_header(GgufType::Array, 1);
  GgufWriter nest;
  nest.add_raw("n", GgufType::Array, deep + GgufWriter::encode_array_header(GgufType::U8, 0));
  EXPECT_CONTAINS(open_error(nest), "nests arrays more than 8 deep");
}

TEST_F(GgufErrors, Alignment) {
  GgufWriter w;
  w.add_u64("general.alignment", 32);
  EXPECT_CONTAINS(open_error(w), "metadata 'general.alignment' is u64, expected u32");
  GgufWriter odd;
  odd.add_u32("general.alignment", 24);
  EXPECT_CONTAINS(open_error(odd), "is 24, not a power of two");
}

TEST_F(GgufErrors, TensorShapesAndTypes) {
  auto one = [&](std::vector<int64_t> ne, uint32_t type, uint64_t offset = 0) {
    GgufWriter w;
    w.add_raw_tensor_info("blk.0.attn_q.weight", type, std::move(ne), offset);
    return open_error(w);
  };
  EXPECT_CONTAINS(one({1, 1, 1, 1, 1}, 0), "tensor 'blk.0.attn_q.weight' has 5 dims");
  EXPECT_CONTAINS(one({4, -2}, 0), "tensor 'blk.0.attn_q.weight' has a negative size -2 in dim 1");
  EXPECT_CONTAINS(one({0, 4}, 0), "tensor 'blk.0.attn_q.weight' is empty (size 0 in dim 0)");
  EXPECT_CONTAINS(one({int64_t(1) << 40, int64_t(1) << 40}, 0),
                  "tensor 'blk.0.attn_q.weight': its size overflows 64 bits");
  EXPECT_CONTAINS(one({256, 4}, 16), "tensor 'blk.0.attn_q.weight' has type iq2_xxs");
  EXPECT_CONTAINS(one({256, 4}, 99), "has type unknown ggml type 99, which tandem does not read");
  EXPECT_CONTAINS(one({256, 4}, 4), "unknown ggml type 4");  // q4_2, removed from ggml
  EXPECT_CONTAINS(one({100, 4}, 12), "rows of 100 values, not a whole number of 256-value blocks");
  EXPECT_CONTAINS(one({4}, 0, 64), "bytes [64, 80) of the data section run past its end (0 bytes");
  EXPECT_CONTAINS(one({4}, 0, 3), "offset 3 is not a multiple of the alignment 32");
  GgufWriter longname;
  longname.add_raw_tensor_info(std::string(64, 'x'), 0, {4}, 0);
  EXPECT_CONTAINS(open_error(longname), "has a name of 64 bytes");
}

TEST_F(GgufErrors, TensorLayout) {
  GgufWriter dup;
  dup.add_tensor("t", DType::F32, {4}, std::string(16, '\0'));
  dup.add_tensor("t", DType::F32, {4}, std::string(16, '\0'));
  EXPECT_CONTAINS(open_error(dup), "tensor 't' appears twice");
  // Two tensors over the same bytes.
  GgufWriter overlap;
  overlap.add_tensor("a", DType::F32, {16}, std::string(64, '\0'));
  overlap.add_raw_tensor_info("b", 0, {8}, 32);
  EXPECT_CONTAINS(open_error(overlap), "overlap tensor 'a'");
  // A file cut short: in the data, then in the tensor infos.
  GgufWriter w;
  w.add_u32("x", 1);
  w.add_tensor("a", DType::F32, {64}, std::string(256, '\1'));
  const std::string whole = w.bytes();
  EXPECT_CONTAINS(open_error(whole.substr(0, whole.size() - 10)), "run past its end");
  EXPECT_CONTAINS(open_error(whole.substr(0, 50)), "declares 1 tensors, but the 9 bytes after offset 41 hold at most 0");
  EXPECT_CONTAINS(open_error(whole.substr(0, 70)), "truncated: tensor 'a' needs 8 bytes");
}

}  // namespace gguf_errors_test
}  // namespace tandem
