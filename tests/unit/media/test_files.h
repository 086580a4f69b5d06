// Reading the media tests' data: whole files, and pixels.safetensors (tests/data/oracle/
// vision/<model>/, made by extract_pixels.py beside it), whose U8 tensors tandem's own
// safetensors reader does not take.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::test {

std::vector<uint8_t> read_file(const std::filesystem::path& path);

std::filesystem::path vision_oracle_dir(const std::string& model);

struct RawTensor {
  std::string dtype;           // "U8", "I32", "F32"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian elements

  int64_t numel() const;
  uint8_t u8(int64_t i) const { return bytes[size_t(i)]; }
  int32_t i32(int64_t i) const;
  float f32(int64_t i) const;
};

struct RawSafetensors {
  std::map<std::string, RawTensor> tensors;
  std::map<std::string, std::string> metadata;
};

RawSafetensors read_raw_safetensors(const std::filesystem::path& path);

}  // namespace tandem::test
