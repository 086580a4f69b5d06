// The grammar of each JSON type under a schema's keywords.
#include "grammar/grammar_error.h"
#include "grammar/numeric_range.h"
#include "grammar/regex.h"
#include "grammar/schema_compiler.h"
#include "grammar/string_formats.h"

namespace tandem::grammar {

namespace {

struct Property {
  std::string name;
  ExprId member;  // "name":value
  bool required;
};

// Members in the given order, any optional one left out, commas only between members;
// `extra` (if any) may follow the declared ones any number of times.
ExprId members(GrammarIr& ir, JsonPieces& json, const std::vector<Property>& props,
               std::optional<ExprId> extra) {
  ExprId comma = json.punct(',');
  // tail[i]: what may follow once something is written, from property i on.
  std::vector<ExprId> tail(props.size() + 1);
  tail[props.size()] = extra ? ir.star(ir.seq({comma, *extra})) : ir.empty();
  for (size_t i = props.size(); i-- > 0;) {
    ExprId one = ir.seq({comma, props[i].member});
    tail[i] = ir.seq({props[i].required ? one : ir.optional(one), tail[i + 1]});
  }
  // The first member written is some property i with only optional ones before it.
  std::vector<ExprId> first;
  bool all_optional = true;
  for (size_t i = 0; i < props.size() && all_optional; ++i) {
    first.push_back(ir.seq({props[i].member, tail[i + 1]}));
    all_optional = !props[i].required;
  }
  if (all_optional) {
    if (extra) first.push_back(ir.seq({*extra, tail[props.size()]}));
    first.push_back(ir.empty());
  }
  return ir.alt(std::move(first));
}

std::optional<Bound> numeric_bound(const Json& s, const char* inclusive, const char* exclusive,
                                   const std::string& path) {
  std::optional<Bound> bound;
  auto take = [&](const char* key, bool excl) {
    auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return;
    std::optional<Decimal> d = decimal_from_json(*it);
    if (!d) grammar_fail(path, key, "'{}' must be a number", key);
    bool lower = std::string_view(inclusive) == "minimum";
    if (!bound || (lower ? (*d > bound->value || (*d == bound->value && excl))
                         : (*d < bound->value || (*d == bound->value && excl))))
      bound = Bound{*d, excl};
  };
  take(inclusive, false);
  take(exclusive, true);
  // Draft 4: "exclusiveMinimum": true makes "minimum" exclusive.
  if (auto it = s.find(exclusive); it != s.end() && it->is_boolean() && it->get<bool>()) {
    if (!s.contains(inclusive))
      grammar_fail(path, exclusive, "'{}': true needs '{}'", exclusive, inclusive);
    bound->exclusive = true;
  }
  return bound;
}

}  // namespace

ExprId SchemaCompiler::object(const Json& s, const std::string& path) {
  const Json empty_object = Json::object();
  const Json& declared = s.contains("properties") ? s["properties"] : empty_object;
  if (!declared.is_object()) grammar_fail(path, "properties", "'properties' must be an object");
  std::set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) grammar_fail(path, "required", "'required' must be an array of strings");
    for (const Json& r : *it) {
      if (!r.is_string()) grammar_fail(path, "required", "'required' must be an array of strings");
      required.insert(r.get<std::string>());
    }
  }
  Json additional = s.contains("additionalProperties")
                        ? s["additionalProperties"]
                        : Json(!(s.contains("properties") && options_.strict_properties));
  std::string additional_path = pointer_child(path, "additionalProperties");

  std::vector<std::pair<std::string, std::pair<Json, std::string>>> schemas;  // name, schema, path
  for (const auto& [name, schema] : declared.items())
    schemas.push_back({name, {schema, pointer_child(pointer_child(path, "properties"), name)}});
  for (const Json& r : s.value("required", Json::array())) {
    std::string name = r.get<std::string>();
    if (declared.contains(name)) continue;
    if (additional == false)
      grammar_fail(path, "required",
                   "'{}' is required, but it is not in 'properties' and no "
                   "additional properties are allowed",
                   name);
    schemas.push_back({name, {additional, additional_path}});
  }

  std::vector<Property> props;
  std::vector<std::string> names;
  for (const auto& [name, entry] : schemas) {
    names.push_back(name);
    bool is_required = required.contains(name);
    if (entry.first == false) {
      if (is_required)
        grammar_fail(entry.second, "required", "'{}' is required but its schema is false", name);
      continue;
    }
    ExprId key = json_.literal_value(Json(name), path, "properties");
    ExprId member = ir_.seq({key, json_.punct(':'), value_rule(entry.first, entry.second)});
    props.push_back(Property{name, member, is_required});
  }
  std::optional<ExprId> extra;
  if (additional != false)
    extra = ir_.seq(
        {json_.key_other_than(names), json_.punct(':'), value_rule(additional, additional_path)});
  return ir_.seq({ir_.literal("{"), json_.ws(), members(ir_, json_, props, extra), json_.ws(),
                  ir_.literal("}")});
}

ExprId SchemaCompiler::array(const Json& s, const std::string& path) {
  // Positions 0..k-1 follow `prefix`, the rest follow `rest`.
  std::vector<std::pair<Json, std::string>> prefix;
  Json rest = true;
  std::string rest_path = pointer_child(path, "items");
  auto items = s.find("items");
  bool tuple = items != s.end() && items->is_array();  // draft 4-2019 tuple form
  const char* prefix_key = tuple ? "items" : "prefixItems";
  if (auto it = s.find(prefix_key); it != s.end()) {
    if (!it->is_array()) grammar_fail(path, prefix_key, "'{}' must be an array", prefix_key);
    for (size_t i = 0; i < it->size(); ++i)
      prefix.push_back(
          {(*it)[i], pointer_child(pointer_child(path, prefix_key), std::to_string(i))});
    const char* rest_key = tuple ? "additionalItems" : "items";
    rest_path = pointer_child(path, rest_key);
    rest = s.contains(rest_key) ? s[rest_key] : Json(!options_.strict_items);
  } else if (items != s.end()) {
    rest = *items;
  }
  uint32_t min = count_field(s, "minItems", path).value_or(0);
  std::optional<uint32_t> max = count_field(s, "maxItems", path);
  auto cap = [&](uint32_t n) { max = max ? std::min(*max, n) : n; };
  for (size_t i = 0; i < prefix.size(); ++i)
    if (prefix[i].first == false) cap(uint32_t(i));
  if (rest == false) cap(uint32_t(prefix.size()));
  if (max && min > *max)
    grammar_fail(path, "minItems", "no array satisfies minItems {} with at most {} items", min,
                 *max);

  auto item = [&](size_t j) {
    return j < prefix.size() ? value_rule(prefix[j].first, prefix[j].second)
                             : value_rule(rest, rest_path);
  };
  ExprId comma = json_.punct(',');
  ExprId open = ir_.seq({ir_.literal("["), json_.ws()}),
         close = ir_.seq({json_.ws(), ir_.literal("]")});
  if (max && *max == 0) return ir_.seq({open, close});
  size_t k = prefix.size(), start = std::max<size_t>(min, 1);
  // Optional items from position `start` on: the prefix ones nested, then the rest repeated.
  ExprId chain = ir_.empty();
  size_t limit = max ? *max : SIZE_MAX;
  if (limit > std::max(k, start)) {
    ExprId one = ir_.seq({comma, item(std::max(k, start))});
    chain = max ? ir_.repeat(one, 0, uint32_t(*max - std::max(k, start))) : ir_.star(one);
  }
  for (size_t j = std::min(k, limit); j-- > start;)
    chain = ir_.optional(ir_.seq({comma, item(j), chain}));
  std::vector<ExprId> body = {item(0)};
  for (size_t j = 1; j < start; ++j) body.push_back(ir_.seq({comma, item(j)}));
  body.push_back(chain);
  ExprId nonempty = ir_.seq(std::move(body));
  return ir_.seq({open, min == 0 ? ir_.optional(nonempty) : nonempty, close});
}

ExprId SchemaCompiler::string(const Json& s, const std::string& path) {
  std::optional<uint32_t> min = count_field(s, "minLength", path),
                          max = count_field(s, "maxLength", path);
  if (min && max && *min > *max)
    grammar_fail(path, "minLength", "minLength {} is above maxLength {}", *min, *max);
  std::optional<std::string> pattern = string_field(s, "pattern", path);
  std::optional<std::string> format = string_field(s, "format", path);
  if ((pattern || format) && (min || max))
    grammar_fail(path, min ? "minLength" : "maxLength", "'{}' together with '{}' is not supported",
                 min ? "minLength" : "maxLength", pattern ? "pattern" : "format");
  if (pattern && format)
    grammar_fail(path, "pattern", "'pattern' together with 'format' is not supported");
  if (format) {
    std::optional<std::string> regex = format_regex(*format);
    if (!regex)
      grammar_fail(path, "format",
                   "format '{}' is not supported (date, time, date-time, uuid and email are)",
                   *format);
    RegexContext ctx{json_.string_encoder(), false, path, "format"};
    return ir_.seq({ir_.literal("\""), compile_regex(ir_, *regex, ctx), ir_.literal("\"")});
  }
  if (pattern) {
    RegexContext ctx{json_.string_encoder(), /*search=*/true, path, "pattern"};
    return ir_.seq({ir_.literal("\""), compile_regex(ir_, *pattern, ctx), ir_.literal("\"")});
  }
  return json_.string_of_length(min.value_or(0), max);
}

ExprId SchemaCompiler::number(const Json& s, const std::string& path, bool integer) {
  std::optional<Bound> lo = numeric_bound(s, "minimum", "exclusiveMinimum", path);
  std::optional<Bound> hi = numeric_bound(s, "maximum", "exclusiveMaximum", path);
  if (!lo && !hi) return integer ? json_.any_integer() : json_.any_number();
  if (!integer) return number_range(ir_, lo, hi);
  std::optional<Decimal> ilo, ihi;
  if (lo) ilo = lo->exclusive ? integer_add(decimal_floor(lo->value), +1) : decimal_ceil(lo->value);
  if (hi) ihi = hi->exclusive ? integer_add(decimal_ceil(hi->value), -1) : decimal_floor(hi->value);
  return integer_range(ir_, ilo, ihi);
}

}  // namespace tandem::grammar
