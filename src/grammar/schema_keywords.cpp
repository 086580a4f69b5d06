#include "grammar/schema_keywords.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "grammar/grammar_error.h"

namespace tandem::grammar {

const std::set<std::string>& all_types() {
  static const std::set<std::string> types = {"object",  "array",   "string", "number",
                                              "integer", "boolean", "null"};
  return types;
}

const std::vector<std::pair<std::string, std::vector<const char*>>>& keyword_families() {
  static const std::vector<std::pair<std::string, std::vector<const char*>>> families = {
      {"object", {"properties", "required", "additionalProperties"}},
      {"array", {"items", "prefixItems", "additionalItems", "minItems", "maxItems"}},
      {"string", {"minLength", "maxLength", "pattern", "format"}},
      {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
  };
  return families;
}

bool is_unsupported_keyword(std::string_view key) {
  static const std::set<std::string_view> keys = {"not",
                                                  "if",
                                                  "then",
                                                  "else",
                                                  "patternProperties",
                                                  "propertyNames",
                                                  "dependentRequired",
                                                  "dependentSchemas",
                                                  "dependencies",
                                                  "minProperties",
                                                  "maxProperties",
                                                  "uniqueItems",
                                                  "contains",
                                                  "minContains",
                                                  "maxContains",
                                                  "unevaluatedProperties",
                                                  "unevaluatedItems",
                                                  "multipleOf",
                                                  "$dynamicRef",
                                                  "$recursiveRef"};
  return keys.contains(key);
}

bool is_constraint_keyword(std::string_view key) {
  static const std::set<std::string_view> keys = {"type",  "enum",  "const", "anyOf",
                                                  "oneOf", "allOf", "$ref"};
  if (keys.contains(key) || is_unsupported_keyword(key)) return true;
  for (const auto& [family, list] : keyword_families())
    for (const char* k : list)
      if (key == k) return true;
  return false;
}

Json constraints_of(const Json& s) {
  Json out = Json::object();
  for (const auto& [key, v] : s.items())
    if (is_constraint_keyword(key)) out[key] = v;
  return out;
}

std::optional<std::vector<Json>> fixed_values(const Json& s, const std::string& path) {
  std::optional<std::vector<Json>> values;
  if (auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array()) grammar_fail(path, "enum", "'enum' must be an array");
    values = std::vector<Json>(it->begin(), it->end());
  }
  if (auto it = s.find("const"); it != s.end()) {
    std::vector<Json> out;
    if (!values || json_contains(*values, *it)) out.push_back(*it);
    values = std::move(out);
  }
  return values;
}

bool json_equal(const Json& a, const Json& b) {
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, v] : a.items())
      if (!b.contains(key) || !json_equal(v, b[key])) return false;
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  return a == b;  // nlohmann compares numbers by value across integer and float
}

bool json_contains(const std::vector<Json>& values, const Json& v) {
  return std::any_of(values.begin(), values.end(), [&](const Json& x) { return json_equal(x, v); });
}

bool value_has_type(const Json& v, const std::set<std::string>& types) {
  switch (v.type()) {
    case Json::value_t::null:
      return types.contains("null");
    case Json::value_t::boolean:
      return types.contains("boolean");
    case Json::value_t::string:
      return types.contains("string");
    case Json::value_t::array:
      return types.contains("array");
    case Json::value_t::object:
      return types.contains("object");
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return types.contains("integer") || types.contains("number");
    case Json::value_t::number_float: {
      double d = v.get<double>();
      return types.contains("number") || (types.contains("integer") && std::floor(d) == d);
    }
    default:
      return false;
  }
}

}  // namespace tandem::grammar
