#include "server/common/request_fields.h"

#include <cmath>

#include "server/common/api_error.h"
#include "server/common/bounded_json.h"

namespace tandem::server {
namespace {

// " (--flag)" after a limit, when a flag sets it.
std::string flag_note(const char* flag) {
  return flag ? fmt::format(" ({})", flag) : std::string();
}

}  // namespace

Json parse_request_body(std::string_view body, const JsonLimits& limits) {
  JsonParse parsed = parse_bounded_json(body, limits);
  if (!parsed.value) {
    if (parsed.refusal == JsonRefusal::Malformed)
      invalid_request("", "Request body is not valid JSON: {}", parsed.message);
    invalid_request("", "Request body is refused: {}", parsed.message);
  }
  if (!parsed.value->is_object())
    invalid_request("", "Request body must be a JSON object, got {}",
                    json_type_name(*parsed.value));
  return std::move(*parsed.value);
}

std::string json_type_name(const Json& value) {
  if (value.is_number_integer()) return "integer";
  return value.type_name();
}

std::string item_path(std::string_view base, size_t i) {
  return fmt::format("{}[{}]", base, i);
}

FieldReader::FieldReader(const Json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object())
    invalid_request(path_, "'{}' must be an object, got {}", path_, json_type_name(object_));
}

const Json* FieldReader::find(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::has(std::string_view key) const {
  return find(key) != nullptr;
}

std::string FieldReader::name(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void FieldReader::wrong_type(std::string_view key, const char* expected) const {
  invalid_request(name(key), "'{}' must be {}, got {}", name(key), expected,
                  json_type_name(*find(key)));
}

std::optional<bool> FieldReader::boolean(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean");
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string");
  return v->get<std::string>();
}

std::optional<int64_t> FieldReader::integer(std::string_view key, int64_t min, int64_t max) const {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
      invalid_request(name(key), "'{}' is too large: {}", name(key), v->dump());
    x = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e18)
      wrong_type(key, "an integer");
    x = int64_t(d);
  } else {
    wrong_type(key, "an integer");
  }
  if (x < min || x > max)
    invalid_request(name(key), "'{}' must be between {} and {}, got {}", name(key), min, max, x);
  return x;
}

std::optional<double> FieldReader::number(std::string_view key, double min, double max) const {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number");
  double x = v->get<double>();
  if (!(x >= min && x <= max))
    invalid_request(name(key), "'{}' must be between {} and {}, got {}", name(key), min, max, x);
  return x;
}

std::optional<double> FieldReader::number_above(std::string_view key, double min,
                                                double max) const {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number");
  double x = v->get<double>();
  if (!(x > min && x <= max))
    invalid_request(name(key), "'{}' must be greater than {} and at most {}, got {}", name(key),
                    min, max, x);
  return x;
}

const Json* FieldReader::object_field(std::string_view key) const {
  const Json* v = find(key);
  if (v && !v->is_object()) wrong_type(key, "an object");
  return v;
}

const Json* FieldReader::array_field(std::string_view key) const {
  const Json* v = find(key);
  if (v && !v->is_array()) wrong_type(key, "an array");
  return v;
}

std::vector<std::string> FieldReader::string_or_list(std::string_view key,
                                                     const StringListBounds& bounds) const {
  const Json* v = find(key);
  std::vector<std::string> out;
  if (!v) return out;
  if (!v->is_string() && !v->is_array()) wrong_type(key, "a string or a list of strings");
  // Checked before anything is copied: a request may not make the server hold more.
  size_t count = v->is_string() ? 1 : v->size();
  if (count > bounds.max_items)
    invalid_request(name(key), "'{}' has {} entries; at most {} are allowed{}", name(key), count,
                    bounds.max_items, flag_note(bounds.items_flag));
  auto take = [&](const Json& item) {
    if (!item.is_string())
      invalid_request(name(key), "'{}' must be a string or a list of strings, found {}", name(key),
                      json_type_name(item));
    const std::string& s = item.get_ref<const std::string&>();
    if (s.empty()) invalid_request(name(key), "'{}' must not contain empty strings", name(key));
    if (s.size() > bounds.max_bytes)
      invalid_request(name(key), "'{}' has a string of {} bytes; at most {} are allowed{}",
                      name(key), s.size(), bounds.max_bytes, flag_note(bounds.bytes_flag));
    out.push_back(s);
  };
  if (v->is_string()) {
    take(*v);
  } else {
    for (const Json& item : *v) take(item);
  }
  return out;
}

std::vector<int64_t> FieldReader::integer_list(std::string_view key, int64_t min,
                                               int64_t max) const {
  const Json* v = array_field(key);
  std::vector<int64_t> out;
  if (!v) return out;
  for (const Json& item : *v) {
    if (!item.is_number_integer())
      invalid_request(name(key), "'{}' must be a list of integers, found {}", name(key),
                      json_type_name(item));
    int64_t x = item.get<int64_t>();
    if (x < min || x > max)
      invalid_request(name(key), "'{}' entries must be between {} and {}, got {}", name(key), min,
                      max, x);
    out.push_back(x);
  }
  return out;
}

const Json& FieldReader::require(std::string_view key) const {
  const Json* v = find(key);
  if (!v) invalid_request(name(key), "'{}' is a required field", name(key));
  return *v;
}

std::string FieldReader::require_string(std::string_view key) const {
  require(key);
  return *string(key);
}

}  // namespace tandem::server
