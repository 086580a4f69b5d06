// A file written in place by offset (pwrite), published atomically: bytes go to
// "<path>.tmp", and commit() renames it to `path`. Destroyed without commit() (an error
// midway, a throwing fill), the temporary is removed, so a crash or failure never leaves a
// truncated file that looks valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace tandem {

class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes all `bytes` at `offset` (large writes are split; short writes retried).
  void write_at(const void* data, size_t bytes, uint64_t offset);
  // Closes and renames into place; errors here (a full disk seen at close) are thrown.
  void commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path tmp_;
  int fd_ = -1;
};

}  // namespace tandem
