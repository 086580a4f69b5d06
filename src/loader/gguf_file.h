// One GGUF file (v2 or v3), mapped read-only and validated once at open.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
// (key, type, value)*, the tensor infos (name, n_dims, ne[n_dims] with ne0 the row length,
// ggml type, u64 offset)*, padding to general.alignment (default 32), then the data
// section, every tensor at its offset from the section's start.
//
// Invariants after open() (each violation is a tandem::Error naming the file, and the key or
// tensor, and the offending value — refused before anything sized by it is allocated, so a
// hostile header costs no more than its own bytes):
//   - every declared count (metadata entries, tensors, array elements) fits the bytes left;
//     every string length too; keys and tensor names are unique;
//   - general.alignment, when present, is a u32 power of two;
//   - every tensor has at most 4 dims, each > 0, whose product and byte size do not
//     overflow; its ggml type is one tandem reads (gguf_types.h), its row length a whole
//     number of blocks; its offset is aligned and its bytes lie inside the data section;
//     no two tensors' bytes overlap.
// Tensors returned by tensor() view the mapping (no copy) and keep it alive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "loader/gguf_value.h"
#include "loader/mapped_file.h"

namespace tandem {

class GgufCursor;

struct GgufTensorInfo {
  std::string_view name;  // views the mapping
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;
  // Row-major, ne reversed: a matrix of ne0 × ne1 is [ne1, ne0] = [N, K], K the row length;
  // stacked experts [E, N, K].
  Shape shape;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  // Structural limits no real file comes near; a count past them is refused at once.
  static constexpr uint64_t kMaxTensors = uint64_t(1) << 20;
  static constexpr uint64_t kMaxMetadata = uint64_t(1) << 20;
  static constexpr uint64_t kMaxKeyBytes = uint64_t(1) << 16;
  static constexpr size_t kMaxNameBytes = 63;  // ggml's GGML_MAX_NAME - 1

  static std::shared_ptr<const GgufFile> open(const std::filesystem::path& path);
  // The same checks over bytes in memory (the fuzz target; `name` stands for the path).
  static std::shared_ptr<const GgufFile> from_bytes(std::string bytes, const std::string& name);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts
  uint64_t file_size() const { return size_; }

  const GgufMetadata& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A CPU tensor viewing the tensor's bytes in the mapping (read-only memory; a tensor whose
  // bytes are not aligned for its type — a file with general.alignment 1 — is copied).
  Tensor tensor(const GgufTensorInfo& info) const;
  // Starts reading the tensor's bytes into the page cache in the background.
  void prefetch(const GgufTensorInfo& info) const;
  // Drops the mapping's resident pages under [p, p + length) (MappedFile::release).
  void release(const void* p, size_t length) const {
    if (mapping_) mapping_->release(p, length);
  }

 private:
  GgufFile() = default;
  void parse();
  void parse_header(GgufCursor& c, uint64_t& num_tensors, uint64_t& num_metadata);
  void parse_metadata(GgufCursor& c, uint64_t count);
  void parse_tensor_infos(GgufCursor& c, uint64_t count);
  void place_data(size_t infos_end);

  std::filesystem::path path_;
  std::shared_ptr<MappedFile> mapping_;  // null for from_bytes
  std::shared_ptr<void> storage_;        // keeps data_ alive: the mapping or the bytes
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  GgufMetadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Whether `path` is a regular file starting with the GGUF magic (what `--model` uses to tell
// a GGUF file from a model folder).
bool is_gguf_file(const std::filesystem::path& path);

}  // namespace tandem
