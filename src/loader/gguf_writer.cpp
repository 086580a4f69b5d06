#include "loader/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace tandem {
namespace {

template <typename T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

std::string entry(std::string_view key, GgufType type, const std::string& value) {
  return GgufWriter::encode_string(key) + le(uint32_t(type)) + value;
}

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

std::string GgufWriter::encode_string(std::string_view s) {
  return le(uint64_t(s.size())) + std::string(s);
}

std::string GgufWriter::encode_array_header(GgufType element, uint64_t count) {
  return le(uint32_t(element)) + le(count);
}

void GgufWriter::add_u32(std::string_view key, uint32_t v) { add_raw(key, GgufType::U32, le(v)); }
void GgufWriter::add_i32(std::string_view key, int32_t v) { add_raw(key, GgufType::I32, le(v)); }
void GgufWriter::add_u64(std::string_view key, uint64_t v) { add_raw(key, GgufType::U64, le(v)); }
void GgufWriter::add_f32(std::string_view key, float v) { add_raw(key, GgufType::F32, le(v)); }
void GgufWriter::add_bool(std::string_view key, bool v) {
  add_raw(key, GgufType::Bool, le(uint8_t(v ? 1 : 0)));
}
void GgufWriter::add_string(std::string_view key, std::string_view v) {
  add_raw(key, GgufType::String, encode_string(v));
}

void GgufWriter::add_strings(std::string_view key, const std::vector<std::string>& v) {
  std::string s = encode_array_header(GgufType::String, v.size());
  for (const std::string& x : v) s += encode_string(x);
  add_raw(key, GgufType::Array, std::move(s));
}

void GgufWriter::add_i32s(std::string_view key, const std::vector<int32_t>& v) {
  std::string s = encode_array_header(GgufType::I32, v.size());
  for (int32_t x : v) s += le(x);
  add_raw(key, GgufType::Array, std::move(s));
}

void GgufWriter::add_f32s(std::string_view key, const std::vector<float>& v) {
  std::string s = encode_array_header(GgufType::F32, v.size());
  for (float x : v) s += le(x);
  add_raw(key, GgufType::Array, std::move(s));
}

void GgufWriter::add_raw(std::string_view key, GgufType type, std::string encoded) {
  metadata_.push_back(entry(key, type, encoded));
}

namespace {

// The file-order dims (ne0 = the row length) and the byte size of a row-major `shape`.
std::vector<int64_t> file_dims(const Shape& shape) {
  std::vector<int64_t> ne;
  for (int d = shape.ndim - 1; d >= 0; d--) ne.push_back(shape.dims[size_t(d)]);
  return ne;
}

uint32_t ggml_id(std::string_view name, DType dtype) {
  auto id = ggml_type_of(dtype);
  if (!id) fail("GgufWriter: tensor '{}': GGUF has no type for {}", name, dtype_name(dtype));
  return *id;
}

size_t nbytes_of(DType dtype, const Shape& shape) {
  Tensor probe;
  probe.dtype = dtype;
  probe.shape = shape;
  return probe.nbytes();
}

}  // namespace

void GgufWriter::add_tensor(std::string_view name, DType dtype, const Shape& shape,
                            std::string bytes) {
  const uint32_t id = ggml_id(name, dtype);
  const size_t want = nbytes_of(dtype, shape);
  if (want != bytes.size())
    fail("GgufWriter: tensor '{}' {} of {} needs {} bytes, got {}", name, shape.str(),
         dtype_name(dtype), want, bytes.size());
  PendingTensor t{std::string(name), id, file_dims(shape), std::move(bytes)};
  t.size = want;
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(std::string_view name, DType dtype, const Shape& shape, RowFill fill,
                            int64_t row_group) {
  const uint32_t id = ggml_id(name, dtype);
  const int64_t cols = shape.ndim ? shape.dims[size_t(shape.ndim - 1)] : 1;
  if (cols % dtype_block(dtype).elems != 0)
    fail("GgufWriter: tensor '{}': rows of {} values are not whole {} blocks of {}", name, cols,
         dtype_name(dtype), dtype_block(dtype).elems);
  PendingTensor t{std::string(name), id, file_dims(shape), ""};
  t.fill = std::move(fill);
  t.size = nbytes_of(dtype, shape);
  t.row_bytes = int64_t(dtype_row_bytes(dtype, cols));
  t.rows = t.row_bytes ? int64_t(t.size) / t.row_bytes : 0;
  t.row_group = std::max<int64_t>(1, row_group);
  if (t.rows % t.row_group != 0)
    fail("GgufWriter: tensor '{}': {} rows are not whole groups of {}", name, t.rows, t.row_group);
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(std::string_view name, const Tensor& host) {
  if (host.device != Device::CPU) fail("GgufWriter: tensor '{}' is not on the host", name);
  add_tensor(name, host.dtype, host.shape,
             std::string(static_cast<const char*>(host.data), host.nbytes()));
}

void GgufWriter::add_raw_tensor_info(std::string_view name, uint32_t ggml_type,
                                     std::vector<int64_t> ne, uint64_t offset) {
  tensors_.push_back({std::string(name), ggml_type, std::move(ne), "", true, offset});
}

void GgufWriter::emit_data(const PendingTensor& t, const Sink& sink) {
  if (!t.fill) return sink(t.bytes.data(), t.bytes.size());
  const int64_t group_bytes = t.row_bytes * t.row_group;
  const int64_t groups =
      std::max<int64_t>(1, int64_t(kChunkBytes) / std::max<int64_t>(1, group_bytes));
  const int64_t chunk_rows = groups * t.row_group;
  std::vector<char> buf(size_t(std::min(chunk_rows, t.rows) * t.row_bytes));
  for (int64_t first = 0; first < t.rows; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, t.rows - first);
    t.fill(buf.data(), first, count);
    sink(buf.data(), size_t(count * t.row_bytes));
  }
}

void GgufWriter::emit(const Sink& sink) const {
  std::vector<std::string> metadata = metadata_;
  if (alignment_ != 32) metadata.push_back(entry("general.alignment", GgufType::U32, le(alignment_)));
  std::string head =
      "GGUF" + le(uint32_t(3)) + le(uint64_t(tensors_.size())) + le(uint64_t(metadata.size()));
  for (const std::string& m : metadata) head += m;
  uint64_t offset = 0;  // in the data section
  std::vector<uint64_t> offsets;
  for (const PendingTensor& t : tensors_) {
    head += encode_string(t.name) + le(uint32_t(t.ne.size()));
    for (int64_t n : t.ne) head += le(n);
    head += le(t.ggml_type);
    offsets.push_back(t.raw ? t.raw_offset : offset);
    head += le(offsets.back());
    if (!t.raw) offset = align_up(offset + t.size, alignment_);
  }
  if (tensors_.empty()) return sink(head.data(), head.size());
  head.resize(align_up(head.size(), alignment_), '\0');
  sink(head.data(), head.size());
  const std::string zeros(alignment_, '\0');
  uint64_t at = 0;  // bytes of the data section written
  for (size_t i = 0; i < tensors_.size(); i++) {
    if (tensors_[i].raw) continue;
    sink(zeros.data(), size_t(offsets[i] - at));  // the previous tensor's padding
    emit_data(tensors_[i], sink);
    at = offsets[i] + tensors_[i].size;
  }
  sink(zeros.data(), size_t(align_up(at, alignment_) - at));
}

std::string GgufWriter::bytes() const {
  std::string out;
  emit([&](const char* data, size_t n) { out.append(data, n); });
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write {}", tmp.string());
    emit([&](const char* data, size_t n) {
      out.write(data, std::streamsize(n));
      if (!out) fail("writing {} failed (disk full?)", tmp.string());
    });
    out.close();
    if (!out) fail("writing {} failed", tmp.string());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace tandem
