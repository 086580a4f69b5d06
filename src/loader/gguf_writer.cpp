#include "loader/gguf_writer.h"

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

void GgufWriter::add_tensor(std::string_view name, DType dtype, const Shape& shape,
                            std::string bytes) {
  auto id = ggml_type_of(dtype);
  if (!id) fail("GgufWriter: tensor '{}': GGUF has no type for {}", name, dtype_name(dtype));
  Tensor probe;
  probe.dtype = dtype;
  probe.shape = shape;
  if (probe.nbytes() != bytes.size())
    fail("GgufWriter: tensor '{}' {} of {} needs {} bytes, got {}", name, shape.str(),
         dtype_name(dtype), probe.nbytes(), bytes.size());
  std::vector<int64_t> ne;
  for (int d = shape.ndim - 1; d >= 0; d--) ne.push_back(shape.dims[size_t(d)]);
  tensors_.push_back({std::string(name), *id, std::move(ne), std::move(bytes)});
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

std::string GgufWriter::bytes() const {
  std::vector<std::string> metadata = metadata_;
  if (alignment_ != 32) metadata.push_back(entry("general.alignment", GgufType::U32, le(alignment_)));
  std::string out = "GGUF" + le(uint32_t(3)) + le(uint64_t(tensors_.size())) +
                    le(uint64_t(metadata.size()));
  for (const std::string& m : metadata) out += m;
  uint64_t offset = 0;  // in the data section
  std::vector<uint64_t> offsets;
  for (const PendingTensor& t : tensors_) {
    out += encode_string(t.name) + le(uint32_t(t.ne.size()));
    for (int64_t n : t.ne) out += le(n);
    out += le(t.ggml_type);
    offsets.push_back(t.raw ? t.raw_offset : offset);
    out += le(offsets.back());
    if (!t.raw) offset = align_up(offset + t.bytes.size(), alignment_);
  }
  if (tensors_.empty()) return out;
  out.resize(align_up(out.size(), alignment_), '\0');
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); i++) {
    if (tensors_[i].raw) continue;
    out.resize(data_start + offsets[i], '\0');
    out += tensors_[i].bytes;
  }
  out.resize(data_start + align_up(out.size() - data_start, alignment_), '\0');
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::string data = bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write {}", path.string());
  out.write(data.data(), std::streamsize(data.size()));
  if (!out) fail("writing {} failed", path.string());
}

}  // namespace tandem
