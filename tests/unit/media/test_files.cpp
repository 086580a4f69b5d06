#include "test_files.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace tandem::test {

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::filesystem::path vision_oracle_dir(const std::string& model) {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "vision" / model;
}

int64_t RawTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int32_t RawTensor::i32(int64_t i) const {
  int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

float RawTensor::f32(int64_t i) const {
  float v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

RawSafetensors read_raw_safetensors(const std::filesystem::path& path) {
  const std::vector<uint8_t> file = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const nlohmann::json header =
      nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + int64_t(n));
  RawSafetensors out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : e.items()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    RawTensor t;
    t.dtype = e["dtype"].get<std::string>();
    t.shape = e["shape"].get<std::vector<int64_t>>();
    const uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    t.bytes.assign(file.begin() + int64_t(8 + n + begin), file.begin() + int64_t(8 + n + end));
    out.tensors[name] = std::move(t);
  }
  return out;
}

}  // namespace tandem::test
