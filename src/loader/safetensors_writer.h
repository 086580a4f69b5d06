// Writes safetensors files the way Hugging Face does: the JSON header lists
// "__metadata__" first, then the tensors in data order; the header is padded with spaces
// so the data starts on an 8-byte boundary; the data is sorted by dtype (4-byte types
// first) then name, so every tensor is aligned to its element size.
//
// Bytes reach the file through pwrite: generated tensors (add_chunked) are produced piece
// by piece into one cache-sized buffer and written from there, so they never exist whole
// in memory and do not travel through DRAM twice. Fills run one at a time and may use
// ThreadPool::global() themselves (the random fills do): that is where the parallelism
// comes from. (Filling a shared mmap of the output instead cost as much or more CPU per GB
// in every run measured, and a full disk would be a SIGBUS rather than an error.) Each file is
// written as "<name>.tmp" and renamed when complete, so a failure never leaves a truncated
// file that looks valid. No fsync: the data is in the page cache when write() returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tandem {

class SafetensorsWriter {
 public:
  // Writes exactly `bytes` (numel × dtype size) of row-major little-endian data at dst.
  using Fill = std::function<void(void* dst, size_t bytes)>;
  // Writes bytes [offset, offset + bytes) of the tensor's data at dst. Called for
  // consecutive pieces of a few MB, each a whole number of elements.
  using ChunkFill = std::function<void(void* dst, size_t offset, size_t bytes)>;

  // The whole tensor is staged in memory for `fill` (one tensor at a time).
  void add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill);
  // Streams the tensor through the writer's buffer: the fast path for generated data
  // (random_chunk_fill in random_fill.h) and any tensor too large to stage.
  void add_chunked(std::string name, DType dtype, std::vector<int64_t> shape, ChunkFill fill);
  // A copy of a CPU tensor's bytes; the tensor's storage is kept alive until written.
  void add(std::string name, const Tensor& tensor);

  size_t num_tensors() const { return tensors_.size(); }
  // Sum of the tensors' data bytes (headers excluded).
  uint64_t total_bytes() const;

  // One file with every tensor.
  void write(const std::filesystem::path& path,
             const std::map<std::string, std::string>& metadata = {}) const;
  // A model folder: "model.safetensors" when everything fits in max_shard_bytes, else
  // "model-0000K-of-0000N.safetensors" shards (tensors in the order they were added,
  // a new shard started when the next tensor would overflow; a tensor larger than a
  // shard gets one to itself) plus "model.safetensors.index.json". Refuses a folder
  // holding other weight files, which would mix with these. Returns the files written.
  std::vector<std::filesystem::path> write_sharded(
      const std::filesystem::path& dir, uint64_t max_shard_bytes,
      const std::map<std::string, std::string>& metadata = {{"format", "pt"}}) const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t bytes;
    Fill fill;  // exactly one of fill and chunk_fill is set
    ChunkFill chunk_fill;
  };
  using Group = std::vector<const Pending*>;

  void add_pending(Pending pending);
  std::vector<Group> plan_shards(uint64_t max_shard_bytes) const;
  static void write_file(const std::filesystem::path& path, Group group,
                         const std::map<std::string, std::string>& metadata);

  std::vector<Pending> tensors_;  // in the order added
  std::unordered_set<std::string> names_;
};

}  // namespace tandem
