// Typed, range-checked reads of request fields. Every failure is a 400 that names the
// field (with its path, e.g. "messages[2].content") and says what was expected and what
// came instead. A field that is absent or null reads as "not given".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/json_text.h"
#include "server/common/server_limits.h"

namespace tandem::server {

// The body of a request, parsed within `limits` (bounded_json.h); a malformed body, one past
// the limits, or a non-object is a 400 that says which.
Json parse_request_body(std::string_view body, const JsonLimits& limits = {});

// JSON type name for messages: "string", "number", "array"...
std::string json_type_name(const Json& value);

// "base[i]": a list item's path, as errors name it.
std::string item_path(std::string_view base, size_t i);

struct StringListBounds {
  size_t max_items = 16;
  size_t max_bytes = 1024;           // of one string
  const char* items_flag = nullptr;  // the flag that sets each bound, named in refusals
  const char* bytes_flag = nullptr;
};

class FieldReader {
 public:
  // `path` prefixes field names in errors ("messages[0]"); empty at the top level.
  // Throws a 400 if `object` is not a JSON object.
  FieldReader(const Json& object, std::string path = {});

  const Json& object() const { return object_; }
  // Present and not null.
  bool has(std::string_view key) const;
  // "path.key" for error messages.
  std::string name(std::string_view key) const;

  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;
  // Integers; a float with an integral value (5.0) is accepted as 5.
  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max) const;
  // Closed range [min, max].
  std::optional<double> number(std::string_view key, double min, double max) const;
  // Open at the bottom: (min, max].
  std::optional<double> number_above(std::string_view key, double min, double max) const;
  const Json* object_field(std::string_view key) const;
  const Json* array_field(std::string_view key) const;

  // A string or a list of strings (OpenAI's `stop`); empty strings rejected, and the
  // bounds checked before anything is copied.
  std::vector<std::string> string_or_list(std::string_view key,
                                          const StringListBounds& bounds) const;
  // A list of integers in [min, max].
  std::vector<int64_t> integer_list(std::string_view key, int64_t min, int64_t max) const;

  std::string require_string(std::string_view key) const;
  const Json& require(std::string_view key) const;

 private:
  const Json* find(std::string_view key) const;
  [[noreturn]] void wrong_type(std::string_view key, const char* expected) const;

  const Json& object_;
  std::string path_;
};

}  // namespace tandem::server
