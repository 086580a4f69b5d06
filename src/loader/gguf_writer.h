// Writes GGUF v3 files: metadata in the order added, then the tensor infos, then each
// tensor's bytes at the next multiple of the alignment (general.alignment is written when
// it is not the default 32). Used by the tests (small files of any shape, including
// malformed ones through the raw hooks) and by `tandem quantize --gguf` / `random-model
// --gguf`, whose tensors are generated while the file is written (add_tensor with a RowFill):
// write() holds the header and one chunk of rows at a time, never the model, so a 70B file
// is written in a few hundred MB. bytes() assembles the whole file in memory (tests).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "loader/gguf_types.h"

namespace tandem {

class GgufWriter {
 public:
  void add_u32(std::string_view key, uint32_t v);
  void add_i32(std::string_view key, int32_t v);
  void add_u64(std::string_view key, uint64_t v);
  void add_f32(std::string_view key, float v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);
  void add_strings(std::string_view key, const std::vector<std::string>& v);
  void add_i32s(std::string_view key, const std::vector<int32_t>& v);
  void add_f32s(std::string_view key, const std::vector<float>& v);
  // A value given as its encoded bytes (after the type): for nested arrays and for tests
  // that write what a well-behaved writer never would.
  void add_raw(std::string_view key, GgufType type, std::string encoded);

  // A tensor of a row-major `shape` ([N, K]: ne0 = K) whose bytes are exactly `bytes`
  // (numel values of a scalar type, or whole blocks of a block type).
  void add_tensor(std::string_view name, DType dtype, const Shape& shape, std::string bytes);
  // A host tensor's bytes (any DType GGUF holds).
  void add_tensor(std::string_view name, const Tensor& host);
  // Writes rows [first, first + count) of a tensor's data at dst (count whole rows of
  // dtype_row_bytes(dtype, row length) each). Called in order, one chunk at a time.
  using RowFill = std::function<void(void* dst, int64_t first, int64_t count)>;
  // A tensor whose rows are produced while the file is written, in chunks of whole
  // `row_group`s (a multiple of it; rows = numel / last dim) of at most ~kChunkBytes.
  void add_tensor(std::string_view name, DType dtype, const Shape& shape, RowFill fill,
                  int64_t row_group = 1);
  static constexpr size_t kChunkBytes = size_t(8) << 20;
  // The tensor info exactly as given (ggml type id, ne in file order, offset) with no data
  // of its own: for malformed files. Its offset is taken as is.
  void add_raw_tensor_info(std::string_view name, uint32_t ggml_type, std::vector<int64_t> ne,
                           uint64_t offset);

  void set_alignment(uint32_t alignment) { alignment_ = alignment; }

  // The file's bytes.
  std::string bytes() const;
  // Streams the file to "<path>.tmp", renamed to `path` once complete (a failure never
  // leaves a truncated file under the real name).
  void write(const std::filesystem::path& path) const;

  // Encodings, for add_raw and hand-made files: a u64-length string; an array header.
  static std::string encode_string(std::string_view s);
  static std::string encode_array_header(GgufType element, uint64_t count);

 private:
  struct PendingTensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> ne;  // file order
    std::string bytes;
    bool raw = false;
    uint64_t raw_offset = 0;
    RowFill fill;       // set: the data comes from here, `bytes` is empty
    uint64_t size = 0;  // data bytes
    int64_t rows = 0, row_bytes = 0, row_group = 1;
  };
  using Sink = std::function<void(const char* data, size_t n)>;
  void emit(const Sink& sink) const;
  static void emit_data(const PendingTensor& t, const Sink& sink);
  std::vector<std::string> metadata_;  // encoded entries: key, type, value
  std::vector<PendingTensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace tandem
