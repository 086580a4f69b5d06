#include "loader/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem {
namespace {

using nlohmann::json;

// safetensors itself refuses headers past 100 MB; a larger one is a corrupt length.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

using Entry = SafetensorsFile::Entry;

uint64_t read_header_length(const MappedFile& file) {
  const std::string name = file.path().string();
  if (file.size() == 0) fail("{}: empty file (not safetensors)", name);
  if (file.size() < 8)
    fail("{}: file is {} bytes, too short for the 8-byte header length", name, file.size());
  uint8_t b[8];
  std::memcpy(b, file.data(), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | b[i];  // little-endian on any host
  if (n > file.size() - 8)
    fail(
        "{}: header length {} runs past the end of the file ({} bytes; truncated or not "
        "safetensors)",
        name, n, file.size());
  if (n > kMaxHeaderBytes) fail("{}: header length {} exceeds the 100 MB limit", name, n);
  if (n < 2) fail("{}: header length {} is too short for a JSON object", name, n);
  return n;
}

json parse_header_json(const MappedFile& file, uint64_t length) {
  const char* text = reinterpret_cast<const char*>(file.data()) + 8;
  json header;
  try {
    header = json::parse(text, text + length);
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", file.path().string(), e.what());
  }
  if (!header.is_object())
    fail("{}: header is JSON {} but must be an object", file.path().string(), header.type_name());
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& file, const json& j) {
  if (!j.is_object()) fail("{}: __metadata__ must be an object, got {}", file, j.type_name());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string())
      fail("{}: __metadata__ value for '{}' must be a string, got {}", file, key,
           value.type_name());
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

// A non-negative integer that fits int64, or an error naming the field.
int64_t parse_count(const std::string& where, const char* field, const json& v) {
  if (!v.is_number_integer())
    fail("{}: {} holds {} {}, not an integer", where, field, v.type_name(), v.dump());
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max()))
      fail("{}: {} value {} is too large", where, field, u);
    return int64_t(u);
  }
  int64_t s = v.get<int64_t>();
  if (s < 0) fail("{}: {} value {} is negative", where, field, s);
  return s;
}

DType parse_dtype(const std::string& file, const std::string& name, const json& j) {
  const json* d = j.contains("dtype") ? &j["dtype"] : nullptr;
  if (!d || !d->is_string()) fail("{}: tensor '{}': missing or non-string 'dtype'", file, name);
  std::string s = d->get<std::string>();
  auto dtype = dtype_from_safetensors(s);
  if (!dtype)
    fail("unsupported dtype {} for tensor '{}' in {} (tandem reads F32, BF16, F16, I32, F8_E4M3)", s, name,
         file);
  return *dtype;
}

Shape parse_shape(const std::string& where, const json& j) {
  if (!j.contains("shape") || !j["shape"].is_array())
    fail("{}: missing or non-array 'shape'", where);
  const json& dims = j["shape"];
  if (dims.size() > size_t(kMaxDims))
    fail("{}: shape {} has {} dims; tandem supports at most {}", where, dims.dump(), dims.size(),
         kMaxDims);
  Shape shape;
  for (const json& d : dims) shape.dims[size_t(shape.ndim++)] = parse_count(where, "shape", d);
  return shape;
}

Entry parse_entry(const std::string& file, const std::string& name, const json& j,
                  uint64_t data_size) {
  const std::string where = fmt::format("{}: tensor '{}'", file, name);
  if (!j.is_object()) fail("{}: entry must be an object, got {}", where, j.type_name());
  Entry e{parse_dtype(file, name, j), parse_shape(where, j), 0, 0};
  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() || j["data_offsets"].size() != 2)
    fail("{}: 'data_offsets' must be an array [begin, end]", where);
  e.begin = uint64_t(parse_count(where, "data_offsets", j["data_offsets"][0]));
  e.end = uint64_t(parse_count(where, "data_offsets", j["data_offsets"][1]));
  if (e.begin > e.end) fail("{}: data_offsets [{}, {}] has begin after end", where, e.begin, e.end);
  if (e.end > data_size)
    fail("{}: data_offsets [{}, {}] run past the data section ({} bytes; file truncated?)", where,
         e.begin, e.end, data_size);
  uint64_t bytes = dtype_size(e.dtype);
  for (int i = 0; i < e.shape.ndim; i++)
    if (__builtin_mul_overflow(bytes, uint64_t(e.shape[i]), &bytes))
      fail("{}: shape {} overflows a 64-bit byte count", where, e.shape.str());
  if (e.end - e.begin != bytes)
    fail("{}: data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", where, e.begin,
         e.end, e.end - e.begin, e.shape.str(), dtype_safetensors_name(e.dtype), bytes);
  return e;
}

// Overlapping tensors would alias each other's weights: a corrupt or hostile header.
void check_no_overlap(const std::string& file,
                      const std::unordered_map<std::string, Entry>& entries) {
  std::vector<std::pair<const std::string*, const Entry*>> by_offset;
  for (const auto& [name, e] : entries)
    if (e.end > e.begin) by_offset.emplace_back(&name, &e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); i++) {
    const auto& [prev_name, prev] = by_offset[i - 1];
    const auto& [name, e] = by_offset[i];
    if (e->begin < prev->end)
      fail("{}: tensor '{}' bytes [{}, {}) overlap tensor '{}' bytes [{}, {})", file, *name,
           e->begin, e->end, *prev_name, prev->begin, prev->end);
  }
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->mapping_ = std::make_shared<MappedFile>(MappedFile::open_read(path));
  const std::string file = path.string();
  uint64_t header_length = read_header_length(*f->mapping_);
  f->data_start_ = 8 + header_length;
  uint64_t data_size = f->mapping_->size() - f->data_start_;
  json header = parse_header_json(*f->mapping_, header_length);
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      f->metadata_ = parse_metadata(file, value);
      continue;
    }
    f->entries_.emplace(name, parse_entry(file, name, value, data_size));
    f->names_.push_back(name);
  }
  check_no_overlap(file, f->entries_);
  std::sort(f->names_.begin(), f->names_.end());
  return f;
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("tensor '{}' not found in {}", name, path_.string());
  return it->second;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const Entry& e = entry(name);
  const std::byte* bytes = mapping_->data() + data_start_ + e.begin;
  Tensor t;
  t.dtype = e.dtype;
  t.shape = e.shape;
  if (reinterpret_cast<uintptr_t>(bytes) % dtype_size(e.dtype) != 0) {
    // Writers that do not pad the header leave elements unaligned; reading them through
    // a typed pointer would be undefined, so this (rare) tensor gets its own copy.
    Tensor copy = Tensor::empty_host(e.dtype, e.shape);
    std::memcpy(copy.data, bytes, e.end - e.begin);
    return copy;
  }
  t.data = const_cast<std::byte*>(bytes);
  t.storage = mapping_;
  return t;
}

void SafetensorsFile::prefetch(const std::string& name) const {
  const Entry& e = entry(name);
  mapping_->advise_willneed(data_start_ + e.begin, e.end - e.begin);
}

}  // namespace tandem
