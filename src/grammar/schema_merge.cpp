// Schema algebra for the compiler: flattening a $ref with keywords beside it, intersecting
// two schemas (allOf), and telling whether two oneOf alternatives can overlap.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "grammar/grammar_error.h"
#include "grammar/numeric_range.h"
#include "grammar/schema_compiler.h"
#include "grammar/schema_keywords.h"

namespace tandem::grammar {

namespace {

// Type sets meet where a type is in both; integer lies inside number.
Json intersect_types(const std::set<std::string>& a, const std::set<std::string>& b) {
  Json out = Json::array();
  for (const std::string& t : a) {
    if (b.contains(t))
      out.push_back(t);
    else if (t == "integer" && b.contains("number"))
      out.push_back(t);
    else if (t == "number" && b.contains("integer"))
      out.push_back("integer");
  }
  return out;
}

bool types_meet(const std::set<std::string>& a, const std::set<std::string>& b) {
  return !intersect_types(a, b).empty();
}

// The tighter of two numeric bounds (lower: the larger one).
Json tighter(const Json& a, const Json& b, bool lower, const std::string& path,
             const std::string& key) {
  std::optional<Decimal> x = decimal_from_json(a), y = decimal_from_json(b);
  if (!x || !y) grammar_fail(path, key, "'{}' must be a number in both merged schemas", key);
  return (lower ? *x >= *y : *x <= *y) ? a : b;
}

bool is_open(const Json& additional) {
  return additional.is_boolean() && additional.get<bool>();
}

// a's additionalProperties (not true) would apply to b's extra properties, which a merge
// cannot express; refuse it.
void check_additional(const Json& a, const Json& b, const std::string& path) {
  auto it = a.find("additionalProperties");
  if (it == a.end() || is_open(*it) || !b.contains("properties")) return;
  for (const auto& [name, v] : b["properties"].items())
    if (!a.contains("properties") || !a["properties"].contains(name))
      grammar_fail(path, "additionalProperties",
                   "merged schemas: property '{}' is one side's additional property", name);
}

// The value of keyword `key` in the intersection of two schemas that set it to cur and v.
Json intersect_keyword(const std::string& key, const Json& cur, const Json& v,
                       const std::string& path) {
  auto both_objects = [&] {
    if (!cur.is_object() || !v.is_object()) grammar_fail(path, key, "'{}' must be an object", key);
  };
  if (key == "type")
    return intersect_types(schema_types(Json{{"type", cur}}), schema_types(Json{{"type", v}}));
  if (key == "required" || key == "allOf" || key == "enum") {
    if (!cur.is_array() || !v.is_array()) grammar_fail(path, key, "'{}' must be an array", key);
    Json out = key == "enum" ? Json::array() : cur;
    std::vector<Json> other(v.begin(), v.end()), mine(cur.begin(), cur.end());
    if (key == "enum") {  // values in both
      for (const Json& x : cur)
        if (json_contains(other, x)) out.push_back(x);
    } else {  // everything from both
      for (const Json& x : v)
        if (key == "allOf" || !json_contains(mine, x)) out.push_back(x);
    }
    return out;
  }
  if (key == "properties") {
    both_objects();
    Json out = cur;
    for (const auto& [name, schema] : v.items())
      out[name] = cur.contains(name) ? Json{{"allOf", Json::array({cur[name], schema})}} : schema;
    return out;
  }
  if (key == "additionalProperties" || key == "items") {
    if (is_open(cur)) return v;
    if (is_open(v)) return cur;
    return Json{{"allOf", Json::array({cur, v})}};
  }
  bool lower =
      key == "minLength" || key == "minItems" || key == "minimum" || key == "exclusiveMinimum";
  bool upper =
      key == "maxLength" || key == "maxItems" || key == "maximum" || key == "exclusiveMaximum";
  if ((lower || upper) && cur.is_number() && v.is_number())
    return tighter(cur, v, lower, path, key);
  grammar_fail(path, key,
               "the schemas merged here (allOf, or keywords beside $ref, anyOf or oneOf) set "
               "'{}' differently, and tandem cannot intersect those",
               key);
}

}  // namespace

Json SchemaCompiler::flatten(const Json& s, const std::string& path, int depth) const {
  if (depth > kMaxMergeDepth)
    grammar_fail(path, "$ref", "schemas nest through $ref more than {} levels", kMaxMergeDepth);
  if (!s.is_object() || !s.contains("$ref")) return s;
  std::string pointer = *string_field(s, "$ref", path);
  Json rest = constraints_of(s);
  rest.erase("$ref");
  const Json& target = resolve(pointer, path);
  Json flat = flatten(target, pointer.substr(1), depth + 1);
  return rest.empty() ? flat : merge(flat, rest, path, depth + 1);
}

Json SchemaCompiler::merge(const Json& a_in, const Json& b_in, const std::string& path,
                           int depth) const {
  Json a = flatten(a_in, path, depth + 1), b = flatten(b_in, path, depth + 1);
  if (a.is_boolean()) return a.get<bool>() ? b : a;
  if (b.is_boolean()) return b.get<bool>() ? a : b;
  if (!a.is_object() || !b.is_object())
    grammar_fail(path, "allOf", "a schema must be an object or a boolean");
  check_keywords(a, path);
  check_keywords(b, path);
  Json out = constraints_of(a);
  Json add = constraints_of(b);
  check_additional(out, add, path);
  check_additional(add, out, path);
  for (const auto& [key, v] : add.items()) {
    if (!out.contains(key) || out[key] == v) {
      out[key] = v;
    } else if (key == "const") {
      out["enum"] = Json::array();  // two different constants: nothing satisfies both
    } else {
      out[key] = intersect_keyword(key, out[key], v, path);
    }
  }
  return out;
}

bool SchemaCompiler::provably_disjoint(const Json& a_in, const Json& b_in,
                                       const std::string& path) const {
  Json a = flatten(a_in, path), b = flatten(b_in, path);
  if (!a.is_object() || !b.is_object()) return a == false || b == false;
  // Which types each side allows, narrowed by its fixed values.
  auto value_types = [&](const Json& s) {
    std::set<std::string> types = schema_types(s);
    if (auto values = fixed_values(s, path)) {
      std::set<std::string> narrowed;
      for (const Json& v : *values)
        for (const std::string& t : types)
          if (value_has_type(v, {t})) narrowed.insert(t);
      return narrowed;
    }
    return types;
  };
  if (!types_meet(value_types(a), value_types(b))) return true;
  auto values_disjoint = [&](const Json& x, const Json& y) {
    auto vx = fixed_values(x, path), vy = fixed_values(y, path);
    if (!vx || !vy) return false;
    for (const Json& v : *vx)
      if (json_contains(*vy, v)) return false;
    return true;
  };
  if (values_disjoint(a, b)) return true;
  // Objects told apart by a property both require, with different fixed values.
  if (!a.contains("required") || !b.contains("required") || !a.contains("properties") ||
      !b.contains("properties"))
    return false;
  for (const Json& name : a["required"]) {
    if (!name.is_string() ||
        std::find(b["required"].begin(), b["required"].end(), name) == b["required"].end())
      continue;
    std::string n = name.get<std::string>();
    if (!a["properties"].contains(n) || !b["properties"].contains(n)) continue;
    if (values_disjoint(flatten(a["properties"][n], path), flatten(b["properties"][n], path)))
      return true;
  }
  return false;
}

}  // namespace tandem::grammar
