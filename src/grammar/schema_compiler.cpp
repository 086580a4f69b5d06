#include "grammar/schema_compiler.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "grammar/grammar_error.h"
#include "grammar/json_schema.h"
#include "grammar/schema_keywords.h"

namespace tandem::grammar {

std::string pointer_child(const std::string& path, const std::string& token) {
  std::string escaped;
  for (char c : token) {
    if (c == '~')
      escaped += "~0";
    else if (c == '/')
      escaped += "~1";
    else
      escaped += c;
  }
  return path + "/" + escaped;
}

std::optional<std::string> string_field(const Json& s, const char* key, const std::string& path) {
  auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  if (!it->is_string()) grammar_fail(path, key, "'{}' must be a string", key);
  return it->get<std::string>();
}

std::optional<uint32_t> count_field(const Json& s, const char* key, const std::string& path) {
  auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  bool integral = it->is_number_integer() ||
                  (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>());
  if (!integral || it->get<double>() < 0)
    grammar_fail(path, key, "'{}' must be a non-negative integer", key);
  if (it->get<double>() > 1e6) grammar_fail(path, key, "'{}' above 1000000 is not supported", key);
  return uint32_t(it->get<double>());
}

std::set<std::string> schema_types(const Json& s) {
  std::set<std::string> out;
  auto it = s.find("type");
  if (it != s.end()) {
    if (it->is_string()) out.insert(it->get<std::string>());
    if (it->is_array())
      for (const Json& t : *it)
        if (t.is_string()) out.insert(t.get<std::string>());
    return out;
  }
  for (const auto& [family, keys] : keyword_families())
    for (const char* k : keys)
      if (s.contains(k)) out.insert(family);
  if (out.empty()) out = all_types();
  return out;
}

SchemaCompiler::SchemaCompiler(GrammarIr& ir, const Json& document, const JsonOptions& options)
    : ir_(ir), document_(document), options_(options), json_(ir, options) {}

void SchemaCompiler::compile() {
  RuleId root = ir_.add_rule("");
  ir_.set_body(root, ir_.seq({json_.ws(), value(document_, ""), json_.ws()}));
  ir_.set_root(root);
}

ExprId SchemaCompiler::value(const Json& s, const std::string& path, int depth) {
  if (depth > kMaxMergeDepth)
    grammar_fail(path, "$ref", "schemas nest through $ref/allOf more than {} levels",
                 kMaxMergeDepth);
  if (s.is_boolean()) return s.get<bool>() ? json_.any_value() : ir_.nothing();
  if (!s.is_object()) grammar_fail(path, "", "a schema must be an object or a boolean");
  check_keywords(s, path);
  if (s.contains("$ref")) {
    Json siblings = constraints_of(s);
    siblings.erase("$ref");
    if (siblings.empty()) return ref(s, path);
    return value(flatten(s, path), path, depth + 1);
  }
  if (s.contains("allOf")) {
    const Json& parts = s["allOf"];
    if (!parts.is_array() || parts.empty())
      grammar_fail(path, "allOf", "'allOf' must be a non-empty array");
    Json merged = constraints_of(s);
    merged.erase("allOf");
    for (size_t i = 0; i < parts.size(); ++i)
      merged =
          merge(merged, parts[i], pointer_child(pointer_child(path, "allOf"), std::to_string(i)));
    return value(merged, path, depth + 1);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return alternatives(s, path, depth);
  if (s.contains("enum") || s.contains("const")) return enumeration(s, path);
  return typed(s, path);
}

ExprId SchemaCompiler::value_rule(const Json& s, const std::string& path) {
  if (s.is_boolean()) return value(s, path);
  if (s.is_object() && s.contains("$ref") && constraints_of(s).size() == 1) return ref(s, path);
  // One rule per distinct schema: equal values share their states, and so their masks.
  std::string key =
      constraints_of(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (auto it = value_rules_.find(key); it != value_rules_.end()) return ir_.ref(it->second);
  RuleId r = ir_.add_rule(path);
  value_rules_.emplace(std::move(key), r);
  ir_.set_body(r, value(s, path));
  return ir_.ref(r);
}

ExprId SchemaCompiler::ref(const Json& s, const std::string& path) {
  std::string pointer = *string_field(s, "$ref", path);
  if (auto it = rules_.find(pointer); it != rules_.end()) return ir_.ref(it->second);
  const Json& target = resolve(pointer, path);
  std::string target_path = pointer.substr(1);
  RuleId r = ir_.add_rule(target_path);
  rules_[pointer] = r;  // before the body: a recursive reference finds it
  ir_.set_body(r, value(target, target_path));
  return ir_.ref(r);
}

const Json& SchemaCompiler::resolve(const std::string& pointer, const std::string& path) const {
  if (pointer.empty() || pointer[0] != '#')
    grammar_fail(path, "$ref",
                 "only references inside the schema (\"#...\") are supported, not '{}'", pointer);
  const Json* node = &document_;
  size_t pos = 1;
  if (pointer.size() > 1 && pointer[1] != '/')
    grammar_fail(path, "$ref", "'{}': anchors are not supported, only JSON pointers", pointer);
  while (pos < pointer.size()) {
    size_t end = pointer.find('/', pos + 1);
    std::string raw =
        pointer.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += raw[i];
      }
    }
    if (node->is_object() && node->contains(token)) {
      node = &(*node)[token];
    } else if (node->is_array() && !token.empty() &&
               token.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(token) < node->size()) {
      node = &(*node)[std::stoul(token)];
    } else {
      grammar_fail(path, "$ref", "'{}' does not point into the schema", pointer);
    }
    pos = end == std::string::npos ? pointer.size() : end;
  }
  return *node;
}

void SchemaCompiler::check_keywords(const Json& s, const std::string& path) const {
  for (const auto& [key, v] : s.items()) {
    if (!is_unsupported_keyword(key)) continue;
    if (key == "uniqueItems" && v == false) continue;  // says nothing
    grammar_fail(path, key, "'{}' cannot be enforced by tandem's grammar engine", key);
  }
  if (auto it = s.find("type"); it != s.end()) {
    auto check = [&](const Json& t) {
      if (!t.is_string() || !all_types().contains(t.get<std::string>()))
        grammar_fail(path, "type", "unknown type {}", t.dump());
    };
    if (it->is_array()) {
      if (it->empty()) grammar_fail(path, "type", "'type' must not be an empty array");
      for (const Json& t : *it) check(t);
    } else {
      check(*it);
    }
  }
}

ExprId SchemaCompiler::alternatives(const Json& s, const std::string& path, int depth) {
  if (s.contains("anyOf") && s.contains("oneOf"))
    grammar_fail(path, "oneOf", "'anyOf' and 'oneOf' in one schema are not supported");
  const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
  const Json& options = s[key];
  if (!options.is_array() || options.empty())
    grammar_fail(path, key, "'{}' must be a non-empty array", key);
  Json siblings = constraints_of(s);
  siblings.erase(key);
  std::string base = pointer_child(path, key);
  std::vector<Json> merged;
  for (size_t i = 0; i < options.size(); ++i)
    merged.push_back(siblings.empty()
                         ? options[i]
                         : merge(siblings, options[i], pointer_child(base, std::to_string(i))));
  if (std::string_view(key) == "oneOf")
    for (size_t i = 0; i < merged.size(); ++i)
      for (size_t j = i + 1; j < merged.size(); ++j)
        if (!provably_disjoint(merged[i], merged[j], base))
          grammar_fail(
              path, "oneOf",
              "alternatives {} and {} may both match one value, and "
              "tandem enforces oneOf only between alternatives that differ in type, in "
              "const/enum values, or in the const value of a required property (use anyOf)",
              i, j);
  std::vector<ExprId> exprs;
  for (size_t i = 0; i < merged.size(); ++i)
    exprs.push_back(value(merged[i], pointer_child(base, std::to_string(i)), depth + 1));
  return ir_.alt(std::move(exprs));
}

ExprId SchemaCompiler::enumeration(const Json& s, const std::string& path) {
  for (const auto& [key, v] : s.items())
    if (key != "enum" && key != "const" && key != "type" && is_constraint_keyword(key))
      grammar_fail(path, key, "'{}' beside 'enum'/'const' is not supported", key);
  std::vector<Json> values = *fixed_values(s, path);
  std::set<std::string> types = s.contains("type") ? schema_types(s) : all_types();
  std::vector<ExprId> options;
  for (const Json& v : values)
    if (value_has_type(v, types))
      options.push_back(json_.literal_value(v, path, s.contains("enum") ? "enum" : "const"));
  return ir_.alt(std::move(options));
}

ExprId SchemaCompiler::typed(const Json& s, const std::string& path) {
  std::set<std::string> types = schema_types(s);
  std::vector<ExprId> options;
  if (types.contains("object")) options.push_back(object(s, path));
  if (types.contains("array")) options.push_back(array(s, path));
  if (types.contains("string")) options.push_back(string(s, path));
  if (types.contains("number"))
    options.push_back(number(s, path, /*integer=*/false));
  else if (types.contains("integer"))
    options.push_back(number(s, path, /*integer=*/true));
  if (types.contains("boolean"))
    options.push_back(ir_.alt({ir_.literal("true"), ir_.literal("false")}));
  if (types.contains("null")) options.push_back(ir_.literal("null"));
  return ir_.alt(std::move(options));
}

void compile_json_schema(GrammarIr& ir, const Json& schema, const JsonOptions& options) {
  try {
    SchemaCompiler(ir, schema, options).compile();
  } catch (const nlohmann::json::exception& e) {
    // A keyword of the wrong JSON type that no check above caught: still a bad schema.
    grammar_fail("", "", "malformed schema: {}", e.what());
  }
}

}  // namespace tandem::grammar
