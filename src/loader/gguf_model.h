// A GGUF model on disk: one file, or the shards of a split one as llama.cpp's gguf-split
// writes them — NAME-00001-of-0000N.gguf … NAME-0000N-of-0000N.gguf, each carrying
// split.no (0-based), split.count and (in the first) split.tensors.count. Given the first
// shard, every shard is opened and checked: all present, numbered in order, the same count,
// no tensor in two shards, and as many tensors as the first shard declares. The model's
// metadata is the first shard's (gguf-split writes it there).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loader/gguf_file.h"

namespace tandem {

class GgufModel {
 public:
  struct TensorRef {
    const GgufFile* file;
    const GgufTensorInfo* info;
  };

  // Opens `path` and, when it is the first shard of a split model, every other shard.
  static std::shared_ptr<const GgufModel> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const GgufMetadata& metadata() const { return shards_.front()->metadata(); }
  const std::vector<std::shared_ptr<const GgufFile>>& shards() const { return shards_; }
  // Every tensor name, in file order (shard by shard).
  const std::vector<std::string_view>& tensor_names() const { return names_; }
  const TensorRef* find(std::string_view name) const;
  // A view of the tensor's bytes (GgufFile::tensor); fails naming the model when absent.
  Tensor tensor(std::string_view name) const;
  // Sum of the shards' file sizes (the loader's progress line).
  uint64_t total_bytes() const;

 private:
  GgufModel() = default;
  void add_shard(std::shared_ptr<const GgufFile> file);
  void open_other_shards(int64_t count);

  std::filesystem::path path_;
  std::vector<std::shared_ptr<const GgufFile>> shards_;
  std::vector<std::string_view> names_;
  std::unordered_map<std::string_view, TensorRef> tensors_;
};

// "NAME-00002-of-00005.gguf" for NAME = "dir/NAME", shard 2 (1-based) of 5: llama.cpp's
// split naming.
std::filesystem::path gguf_shard_path(const std::string& prefix, int shard, int count);

// The file's weight types for /v1/models, /stats and the ready card: general.file_type's
// name, then each tensor type with its tensor count, most first:
// "Q4_K_M: q4_k 120, q6_k 25, f32 65".
std::string gguf_weight_summary(const GgufModel& model);
// llama.cpp's name of a general.file_type value ("Q4_K_M", "F16", "BF16"); "file_type N"
// for one it does not define.
std::string gguf_file_type_name(int64_t file_type);

}  // namespace tandem
