#include "loader/gguf_value.h"

#include <limits>

#include "loader/gguf_cursor.h"

namespace tandem {
namespace {

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The scalar at p as an int64; `ok` false when the type is no integer or the value does not fit.
int64_t integer_at(GgufType t, const std::byte* p, bool& ok) {
  ok = true;
  switch (t) {
    case GgufType::U8: return load<uint8_t>(p);
    case GgufType::I8: return load<int8_t>(p);
    case GgufType::U16: return load<uint16_t>(p);
    case GgufType::I16: return load<int16_t>(p);
    case GgufType::U32: return load<uint32_t>(p);
    case GgufType::I32: return load<int32_t>(p);
    case GgufType::I64: return load<int64_t>(p);
    case GgufType::U64: {
      uint64_t u = load<uint64_t>(p);
      ok = u <= uint64_t(std::numeric_limits<int64_t>::max());
      return int64_t(u);
    }
    default: ok = false; return 0;
  }
}

bool is_integer_type(GgufType t) {
  bool ok;
  std::byte zero[8]{};
  integer_at(t, zero, ok);
  return ok;
}

double float_at(GgufType t, const std::byte* p, bool& ok) {
  ok = true;
  if (t == GgufType::F32) return load<float>(p);
  if (t == GgufType::F64) return load<double>(p);
  return double(integer_at(t, p, ok));
}

[[noreturn]] void wrong_type(std::string_view what, const GgufValue& v, std::string_view wanted) {
  fail("{} is {}, expected {}", what, v.type_description(), wanted);
}

}  // namespace

GgufValue read_gguf_value(GgufCursor& c, GgufType type, std::string_view what, int depth) {
  if (uint32_t(type) >= kNumGgufTypes)
    fail("{}: {} has an unknown value type {}", c.source(), what, uint32_t(type));
  if (type == GgufType::String) {
    std::string_view s = c.read_string(what, c.remaining());
    return GgufValue(type, reinterpret_cast<const std::byte*>(s.data()), s.size());
  }
  if (type != GgufType::Array) {
    size_t n = gguf_type_size(type);
    return GgufValue(type, c.take(n, what), n);
  }
  auto element = GgufType(c.read<uint32_t>(what));
  if (uint32_t(element) >= kNumGgufTypes)
    fail("{}: {} is an array of unknown value type {}", c.source(), what, uint32_t(element));
  const uint64_t count = c.read<uint64_t>(what);
  // Every element takes at least this many bytes: a count the rest of the file cannot
  // hold is refused before a single element is read.
  const size_t min_bytes = gguf_min_value_bytes(element);
  if (count > c.remaining() / min_bytes)
    fail("{}: {} declares {} {} elements, but the {} bytes left in the file hold at most {}",
         c.source(), what, count, gguf_type_name(element), c.remaining(),
         c.remaining() / min_bytes);
  const size_t start = c.offset();
  const std::byte* data = nullptr;
  if (element == GgufType::String) {
    data = c.take(0, what);
    for (uint64_t i = 0; i < count; i++) c.read_string(what, c.remaining());
  } else if (element == GgufType::Array) {
    if (depth + 1 >= kMaxGgufArrayDepth)
      fail("{}: {} nests arrays more than {} deep", c.source(), what, kMaxGgufArrayDepth);
    data = c.take(0, what);
    for (uint64_t i = 0; i < count; i++) read_gguf_value(c, GgufType::Array, what, depth + 1);
  } else {
    data = c.take(count * gguf_type_size(element), what);
  }
  return GgufValue(type, data, c.offset() - start, element, count);
}

bool GgufValue::is_integer() const { return is_integer_type(type_); }
bool GgufValue::is_float() const { return type_ == GgufType::F32 || type_ == GgufType::F64; }

std::string GgufValue::type_description() const {
  if (type_ != GgufType::Array) return gguf_type_name(type_);
  return fmt::format("array of {} {}", count_, gguf_type_name(element_type_));
}

int64_t GgufValue::as_int(std::string_view what) const {
  bool ok = false;
  int64_t v = type_ == GgufType::Array ? 0 : integer_at(type_, data_, ok);
  if (!ok) {
    if (type_ == GgufType::U64) fail("{} is {}, past the largest integer tandem reads", what, load<uint64_t>(data_));
    wrong_type(what, *this, "an integer");
  }
  return v;
}

double GgufValue::as_float(std::string_view what) const {
  bool ok = false;
  double v = type_ == GgufType::Array ? 0 : float_at(type_, data_, ok);
  if (!ok) wrong_type(what, *this, "a number");
  return v;
}

bool GgufValue::as_bool(std::string_view what) const {
  if (type_ != GgufType::Bool) wrong_type(what, *this, "a bool");
  return load<uint8_t>(data_) != 0;
}

std::string_view GgufValue::as_string(std::string_view what) const {
  if (type_ != GgufType::String) wrong_type(what, *this, "a string");
  return {reinterpret_cast<const char*>(data_), bytes_};
}

void GgufValue::expect_array(std::string_view what) const {
  if (type_ != GgufType::Array) wrong_type(what, *this, "an array");
}

std::vector<GgufValue> GgufValue::elements(std::string_view what) const {
  expect_array(what);
  std::vector<GgufValue> out;
  out.reserve(size_t(count_));
  GgufCursor c(data_, bytes_, std::string(what));
  for (uint64_t i = 0; i < count_; i++) out.push_back(read_gguf_value(c, element_type_, what, 1));
  return out;
}

std::vector<int64_t> GgufValue::as_ints(std::string_view what) const {
  expect_array(what);
  if (!is_integer_type(element_type_)) wrong_type(what, *this, "an array of integers");
  std::vector<int64_t> out(static_cast<size_t>(count_));
  const size_t size = gguf_type_size(element_type_);
  bool ok = true;
  for (size_t i = 0; i < out.size(); i++) {
    out[i] = integer_at(element_type_, data_ + i * size, ok);
    if (!ok) fail("{}[{}] is past the largest integer tandem reads", what, i);
  }
  return out;
}

std::vector<float> GgufValue::as_floats(std::string_view what) const {
  expect_array(what);
  if (!is_integer_type(element_type_) && element_type_ != GgufType::F32 &&
      element_type_ != GgufType::F64)
    wrong_type(what, *this, "an array of numbers");
  std::vector<float> out(static_cast<size_t>(count_));
  const size_t size = gguf_type_size(element_type_);
  bool ok = true;
  for (size_t i = 0; i < out.size(); i++) out[i] = float(float_at(element_type_, data_ + i * size, ok));
  return out;
}

std::vector<std::string_view> GgufValue::as_strings(std::string_view what) const {
  expect_array(what);
  if (element_type_ != GgufType::String) wrong_type(what, *this, "an array of strings");
  std::vector<std::string_view> out;
  out.reserve(size_t(count_));
  GgufCursor c(data_, bytes_, std::string(what));
  for (uint64_t i = 0; i < count_; i++) out.push_back(c.read_string(what, c.remaining()));
  return out;
}

GgufMetadata::GgufMetadata(std::string source, std::vector<Entry> entries)
    : source_(std::move(source)), entries_(std::move(entries)) {
  index_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); i++) index_.emplace(entries_[i].key, i);
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].value;
}

std::string GgufMetadata::where(std::string_view key) const {
  return fmt::format("{}: metadata '{}'", source_, key);
}

std::optional<int64_t> GgufMetadata::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(v->as_int(where(key))) : std::nullopt;
}

std::optional<double> GgufMetadata::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(v->as_float(where(key))) : std::nullopt;
}

std::optional<bool> GgufMetadata::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(v->as_bool(where(key))) : std::nullopt;
}

std::optional<std::string_view> GgufMetadata::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? std::optional(v->as_string(where(key))) : std::nullopt;
}

int64_t GgufMetadata::require_int(std::string_view key) const {
  auto v = get_int(key);
  if (!v) fail("{}: required metadata '{}' is missing", source_, key);
  return *v;
}

std::string_view GgufMetadata::require_string(std::string_view key) const {
  auto v = get_string(key);
  if (!v) fail("{}: required metadata '{}' is missing", source_, key);
  return *v;
}

}  // namespace tandem
