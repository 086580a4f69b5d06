// One .safetensors file, mapped read-only and validated once at open.
//
// Layout: [u64 little-endian header length N][N bytes of JSON header][data]. The header
// maps each tensor name to {dtype, shape, data_offsets: [begin, end)} relative to the
// start of the data, plus an optional "__metadata__" object of strings.
//
// Invariants after open() (each violation is a tandem::Error naming the file and tensor):
//   - every tensor's dtype is one tandem stores (F32, BF16, F16, I32);
//   - shape has at most kMaxDims non-negative dims;
//   - begin <= end <= data size and end - begin == numel * dtype size;
//   - no two tensors' byte ranges overlap.
// Tensors returned by tensor() point into the mapping (no copy) and keep it alive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "loader/mapped_file.h"

namespace tandem {

class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  // Tensor names, sorted.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // A CPU tensor viewing the mapped bytes; its `storage` keeps the mapping alive. The
  // memory is read-only: writing through `data` faults. (A tensor whose bytes are not
  // aligned to its element size in the file is copied into an aligned buffer instead.)
  Tensor tensor(const std::string& name) const;
  // The "__metadata__" strings (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Asks the kernel to start reading this tensor's bytes (before an upload, say).
  void prefetch(const std::string& name) const;

  struct Entry {
    DType dtype;
    Shape shape;
    uint64_t begin;  // byte offsets into the data section, [begin, end)
    uint64_t end;
  };
  const Entry& entry(const std::string& name) const;

 private:
  SafetensorsFile() = default;

  std::filesystem::path path_;
  std::shared_ptr<MappedFile> mapping_;
  uint64_t data_start_ = 0;  // 8 + header length: where offset 0 of the data lives
  std::unordered_map<std::string, Entry> entries_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tandem
