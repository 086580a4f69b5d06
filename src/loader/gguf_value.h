// GGUF metadata: key → value, where a value is a scalar, a string or an array (of scalars,
// strings, or arrays). Values are views of the mapped file, validated when the file was
// opened (every length inside it), so reading one never leaves its bytes; they live as
// long as the GgufFile that made them.
//
// Typed reads are lenient where writers differ and strict where it matters: any integer
// type reads as an integer (llama.cpp's writers use u32, i32 and u64 for the same keys), a
// float as f32 or f64, but a string is never a number. A wrong type is a tandem::Error
// naming the key, the type found and the type wanted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loader/gguf_types.h"

namespace tandem {

class GgufValue {
 public:
  GgufValue() = default;
  // A value of `type` whose encoded bytes are [data, data + bytes): a scalar's bytes, a
  // string's characters, or an array's elements (element type and count given).
  GgufValue(GgufType type, const std::byte* data, size_t bytes, GgufType element_type = GgufType::U8,
            uint64_t count = 1)
      : type_(type), element_type_(element_type), count_(count), data_(data), bytes_(bytes) {}

  GgufType type() const { return type_; }
  GgufType element_type() const { return element_type_; }  // arrays only
  uint64_t count() const { return count_; }                // array elements (1 otherwise)
  bool is_integer() const;
  bool is_float() const;
  // "u32", "string", "array of 32000 string", "array of 3 array"
  std::string type_description() const;

  // Typed reads; `what` names the value in errors ("FILE: metadata 'llama.block_count'").
  int64_t as_int(std::string_view what) const;  // any integer type (a u64 past INT64_MAX fails)
  double as_float(std::string_view what) const;  // f32, f64, or any integer
  bool as_bool(std::string_view what) const;
  std::string_view as_string(std::string_view what) const;
  // Arrays, element by element (the element type must fit as above).
  std::vector<int64_t> as_ints(std::string_view what) const;
  std::vector<float> as_floats(std::string_view what) const;
  std::vector<std::string_view> as_strings(std::string_view what) const;
  // Any array, as one value per element (the way to walk nested arrays).
  std::vector<GgufValue> elements(std::string_view what) const;

 private:
  void expect_array(std::string_view what) const;

  GgufType type_ = GgufType::U8;
  GgufType element_type_ = GgufType::U8;
  uint64_t count_ = 1;
  const std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

class GgufCursor;

// Reads one value of `type` at the cursor, checking every length inside it (a string's,
// an array's count times its smallest element) against the bytes left before reading on.
// Arrays nest at most kMaxGgufArrayDepth deep.
constexpr int kMaxGgufArrayDepth = 8;
GgufValue read_gguf_value(GgufCursor& cursor, GgufType type, std::string_view what, int depth = 0);

// The metadata of one file, in file order, with lookups by key. `source` (the file's path)
// prefixes every error.
class GgufMetadata {
 public:
  struct Entry {
    std::string_view key;
    GgufValue value;
  };

  GgufMetadata() = default;
  GgufMetadata(std::string source, std::vector<Entry> entries);

  const std::string& source() const { return source_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // "FILE: metadata 'KEY'", how errors name a key.
  std::string where(std::string_view key) const;

  // nullopt when the key is absent; an error when it holds another type.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  // The same, failing "FILE: required metadata 'KEY' is missing" when absent.
  int64_t require_int(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;

 private:
  std::string source_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, size_t> index_;  // key -> entries_ index
};

}  // namespace tandem
