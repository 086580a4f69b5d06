// Every way a safetensors file can be broken gives a tandem::Error that names the file and,
// where one is involved, the tensor and the field.
#include <gtest/gtest.h>

#include <cstring>

#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace safetensors_errors_test {

using test::TempDir;

class SafetensorsErrors : public ::testing::Test {
 protected:
  // Writes `bytes` to bad.safetensors and returns the error opening it raises.
  std::string open_error(const std::string& bytes) {
    test::write_bytes(file(), bytes);
    return test::error_of([&] { SafetensorsFile::open(file()); });
  }
  // A file whose header is `header` (padded to 8) followed by `data_bytes` zero bytes.
  std::string header_error(std::string header, size_t data_bytes) {
    header.append((8 - header.size() % 8) % 8, ' ');
    return open_error(test::raw_safetensors(header, std::string(data_bytes, '\0')));
  }
  std::filesystem::path file() const { return dir_ / "bad.safetensors"; }

  TempDir dir_;
};

TEST_F(SafetensorsErrors, MissingFile) {
  std::string e = test::error_of([&] { SafetensorsFile::open(dir_ / "nope.safetensors"); });
  EXPECT_CONTAINS(e, "nope.safetensors");
  EXPECT_CONTAINS(e, "No such file");
}

TEST_F(SafetensorsErrors, EmptyFile) {
  std::string e = open_error("");
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "empty");
}

TEST_F(SafetensorsErrors, ShorterThanTheLengthField) {
  std::string e = open_error("abc");
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "3 bytes");
}

TEST_F(SafetensorsErrors, TruncatedFile) {
  SafetensorsWriter w;
  w.add("a", DType::F32, {4}, [](void* d, size_t n) { std::memset(d, 0, n); });
  w.add("b", DType::F32, {4}, [](void* d, size_t n) { std::memset(d, 0, n); });
  w.write(file());
  std::string whole = test::read_bytes(file());
  std::string e = open_error(whole.substr(0, whole.size() - 4));  // cut into tensor b
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "tensor 'b'");
  EXPECT_CONTAINS(e, "data_offsets [16, 32]");
  EXPECT_CONTAINS(e, "28 bytes");  // what is left of the data
}

TEST_F(SafetensorsErrors, HeaderLengthPastEndOfFile) {
  std::string e = open_error(test::u64_le(1000) + R"({"a":1})");
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "header length 1000");
  EXPECT_CONTAINS(e, "15 bytes");
}

TEST_F(SafetensorsErrors, HugeHeaderLength) {
  // A length whose high byte is set: e.g. a file that is not safetensors at all.
  std::string e = open_error(test::u64_le(uint64_t(1) << 63) + "{}");
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "runs past the end");
}

TEST_F(SafetensorsErrors, InvalidJsonHeader) {
  std::string e = header_error("{\"a\": {\"dtype\": \"F32\",", 0);
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "not valid JSON");
}

TEST_F(SafetensorsErrors, HeaderNotAnObject) {
  std::string e = header_error("[1, 2, 3]", 0);
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "must be an object");
}

TEST_F(SafetensorsErrors, OffsetsOutOfRange) {
  std::string e = header_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "tensor 'w'");
  EXPECT_CONTAINS(e, "data_offsets [0, 16]");
  EXPECT_CONTAINS(e, "(8 bytes");
}

TEST_F(SafetensorsErrors, OffsetsInconsistentWithShapeAndDtype) {
  std::string e = header_error(R"({"w":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,8]}})", 8);
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "tensor 'w'");
  EXPECT_CONTAINS(e, "hold 8 bytes but shape [3, 2] of BF16 needs 12");
}

TEST_F(SafetensorsErrors, BeginAfterEnd) {
  std::string e = header_error(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8);
  EXPECT_CONTAINS(e, "tensor 'w'");
  EXPECT_CONTAINS(e, "begin after end");
}

TEST_F(SafetensorsErrors, OverlappingTensors) {
  std::string e = header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                               12);
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "tensor 'b' bytes [4, 12) overlap tensor 'a' bytes [0, 8)");
}

TEST_F(SafetensorsErrors, UnsupportedDtypes) {
  for (const char* dtype : {"F64", "I64", "U8", "BOOL", "F8_E5M2", "FLOAT"}) {
    std::string header =
        fmt::format(R"({{"w":{{"dtype":"{}","shape":[1],"data_offsets":[0,8]}}}})", dtype);
    std::string e = header_error(header, 8);
    EXPECT_CONTAINS(
        e, fmt::format("unsupported dtype {} for tensor 'w' in {}", dtype, file().string()));
  }
}

TEST_F(SafetensorsErrors, MissingFields) {
  EXPECT_CONTAINS(header_error(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4),
                  "tensor 'w': missing or non-string 'dtype'");
  EXPECT_CONTAINS(header_error(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4),
                  "tensor 'w': missing or non-array 'shape'");
  EXPECT_CONTAINS(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                  "tensor 'w': 'data_offsets' must be an array [begin, end]");
  EXPECT_CONTAINS(header_error(R"({"w":[1,2]})", 0), "tensor 'w': entry must be an object");
}

TEST_F(SafetensorsErrors, BadShapes) {
  EXPECT_CONTAINS(header_error(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                  "tensor 'w': shape value -1 is negative");
  EXPECT_CONTAINS(header_error(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                  "tensor 'w': shape holds number 1.5, not an integer");
  EXPECT_CONTAINS(
      header_error(R"({"w":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", 4),
      "tensor 'w': shape [1,1,1,1,1] has 5 dims; tandem supports at most 4");
  EXPECT_CONTAINS(
      header_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
                   4),
      "tensor 'w': shape [4294967296, 4294967296] overflows");
}

TEST_F(SafetensorsErrors, BadMetadata) {
  std::string e = header_error(R"({"__metadata__":{"format":1}})", 0);
  EXPECT_CONTAINS(e, file().string());
  EXPECT_CONTAINS(e, "__metadata__ value for 'format' must be a string");
}

TEST_F(SafetensorsErrors, MissingTensorLookup) {
  std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  test::write_bytes(file(), test::raw_safetensors(header, std::string(4, '\0')));
  auto f = SafetensorsFile::open(file());
  std::string e = test::error_of([&] { f->tensor("v"); });
  EXPECT_EQ(e, fmt::format("tensor 'v' not found in {}", file().string()));
}

TEST_F(SafetensorsErrors, WriteIntoAMissingFolder) {
  SafetensorsWriter w;
  w.add("x", DType::F32, {1}, [](void* d, size_t n) { std::memset(d, 0, n); });
  std::string e = test::error_of([&] { w.write(dir_ / "absent" / "x.safetensors"); });
  EXPECT_CONTAINS(e, (dir_ / "absent" / "x.safetensors.tmp").string());
  EXPECT_CONTAINS(e, "No such file");
}

}  // namespace safetensors_errors_test
}  // namespace tandem
