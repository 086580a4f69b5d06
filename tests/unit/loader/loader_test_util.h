// Helpers for the loader tests: a temporary folder that cleans itself up, and raw
// safetensors files built by hand (independently of SafetensorsWriter) so the reader is
// tested against bytes we wrote ourselves.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"

// Expects `text` (a std::string) to contain `part`, printing the whole text if not.
#define EXPECT_CONTAINS(text, part)                          \
  do {                                                       \
    const std::string text_ = (text);                        \
    EXPECT_NE(text_.find(part), std::string::npos)           \
        << "\"" << text_ << "\" lacks \"" << (part) << "\""; \
  } while (0)

namespace tandem::test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("tandem-loader-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; i++) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

// [u64 length][header][data], with the header stored exactly as given (no padding).
inline std::string raw_safetensors(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

// Runs fn and returns the tandem::Error message it throws (fails the test if none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tandem::Error";
  return "";
}

}  // namespace tandem::test
