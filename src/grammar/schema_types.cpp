// The grammar of each JSON type under a schema's keywords.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

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
               std::optional<ExprId> extra, const std::string& path) {
  ExprId comma = json.punct(',');
  // tail[i]: what may follow once something is written, from property i on. Each first
  // member below and each tail holds the next tail, so past a few properties the tails are
  // rules (entered by a jump: the call is the rule's last step), not copies: the grammar
  // stays linear in the number of properties.
  bool as_rules = props.size() > 8;
  std::vector<ExprId> tail(props.size() + 1);
  tail[props.size()] = extra ? ir.star(ir.seq({comma, *extra})) : ir.empty();
  for (size_t i = props.size(); i-- > 0;) {
    ExprId one = ir.seq({comma, props[i].member});
    tail[i] = ir.seq({props[i].required ? one : ir.optional(one), tail[i + 1]});
    if (as_rules) {
      RuleId r = ir.add_rule(fmt::format("{} (members from '{}' on)", path, props[i].name));
      ir.set_body(r, tail[i]);
      tail[i] = ir.ref(r);
    }
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

namespace {

struct PropertySchema {
  std::string name;
  Json schema;
  std::string path;
  bool required;
};

std::set<std::string> required_names(const Json& s, const std::string& path) {
  std::set<std::string> out;
  auto it = s.find("required");
  if (it == s.end()) return out;
  if (!it->is_array()) grammar_fail(path, "required", "'required' must be an array of strings");
  for (const Json& r : *it) {
    if (!r.is_string()) grammar_fail(path, "required", "'required' must be an array of strings");
    out.insert(r.get<std::string>());
  }
  return out;
}

// The declared properties in order, then required ones not declared (which take the
// additionalProperties schema).
std::vector<PropertySchema> property_schemas(const Json& s, const std::string& path,
                                             const Json& additional) {
  const Json empty_object = Json::object();
  const Json& declared = s.contains("properties") ? s["properties"] : empty_object;
  if (!declared.is_object()) grammar_fail(path, "properties", "'properties' must be an object");
  std::set<std::string> required = required_names(s, path);
  std::vector<PropertySchema> out;
  for (const auto& [name, schema] : declared.items())
    out.push_back({name, schema, pointer_child(pointer_child(path, "properties"), name),
                   required.contains(name)});
  for (const Json& r : s.value("required", Json::array())) {
    std::string name = r.get<std::string>();
    if (declared.contains(name) ||
        std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.name == name; }))
      continue;
    if (additional == false)
      grammar_fail(path, "required",
                   "'{}' is required, but it is not in 'properties' and no "
                   "additional properties are allowed",
                   name);
    out.push_back({name, additional, pointer_child(path, "additionalProperties"), true});
  }
  return out;
}

// Where an array's items come from: positions below prefix.size() follow prefix, the rest
// follow rest; and how many there may be.
struct ArrayPlan {
  std::vector<std::pair<Json, std::string>> prefix;  // schema, path
  Json rest = true;
  std::string rest_path;
  uint32_t min = 0;
  std::optional<uint32_t> max;
};

ArrayPlan array_plan(const Json& s, const std::string& path, bool strict_items) {
  ArrayPlan plan;
  plan.rest_path = pointer_child(path, "items");
  auto items = s.find("items");
  bool tuple = items != s.end() && items->is_array();  // the draft 4-2019 tuple form
  const char* prefix_key = tuple ? "items" : "prefixItems";
  if (auto it = s.find(prefix_key); it != s.end()) {
    if (!it->is_array()) grammar_fail(path, prefix_key, "'{}' must be an array", prefix_key);
    for (size_t i = 0; i < it->size(); ++i)
      plan.prefix.push_back(
          {(*it)[i], pointer_child(pointer_child(path, prefix_key), std::to_string(i))});
    const char* rest_key = tuple ? "additionalItems" : "items";
    plan.rest_path = pointer_child(path, rest_key);
    plan.rest = s.contains(rest_key) ? s[rest_key] : Json(!strict_items);
  } else if (items != s.end()) {
    plan.rest = *items;
  }
  plan.min = count_field(s, "minItems", path).value_or(0);
  plan.max = count_field(s, "maxItems", path);
  auto cap = [&](size_t n) { plan.max = uint32_t(plan.max ? std::min<size_t>(*plan.max, n) : n); };
  for (size_t i = 0; i < plan.prefix.size(); ++i)
    if (plan.prefix[i].first == false) cap(i);
  if (plan.rest == false) cap(plan.prefix.size());
  if (plan.max && plan.min > *plan.max)
    grammar_fail(path, "minItems", "no array satisfies minItems {} with at most {} items", plan.min,
                 *plan.max);
  return plan;
}

}  // namespace

ExprId SchemaCompiler::object(const Json& s, const std::string& path) {
  Json additional = s.contains("additionalProperties")
                        ? s["additionalProperties"]
                        : Json(!(s.contains("properties") && options_.strict_properties));
  std::vector<Property> props;
  std::vector<std::string> names;
  for (const PropertySchema& p : property_schemas(s, path, additional)) {
    names.push_back(p.name);
    if (p.schema == false) {  // it can never appear
      if (p.required)
        grammar_fail(p.path, "required", "'{}' is required but its schema is false", p.name);
      continue;
    }
    ExprId key = json_.literal_value(Json(p.name), path, "properties");
    props.push_back(Property{p.name, ir_.seq({key, json_.punct(':'), value_rule(p.schema, p.path)}),
                             p.required});
  }
  std::optional<ExprId> extra;
  if (additional != false)
    extra = ir_.seq({json_.key_other_than(names), json_.punct(':'),
                     value_rule(additional, pointer_child(path, "additionalProperties"))});
  return ir_.seq({ir_.literal("{"), json_.ws(), members(ir_, json_, props, extra, path), json_.ws(),
                  ir_.literal("}")});
}

ExprId SchemaCompiler::array(const Json& s, const std::string& path) {
  ArrayPlan plan = array_plan(s, path, options_.strict_items);
  auto item = [&](size_t j) {
    return j < plan.prefix.size() ? value_rule(plan.prefix[j].first, plan.prefix[j].second)
                                  : value_rule(plan.rest, plan.rest_path);
  };
  ExprId comma = json_.punct(',');
  ExprId open = ir_.seq({ir_.literal("["), json_.ws()}),
         close = ir_.seq({json_.ws(), ir_.literal("]")});
  if (plan.max && *plan.max == 0) return ir_.seq({open, close});
  size_t k = plan.prefix.size(), start = std::max<size_t>(plan.min, 1);
  size_t limit = plan.max ? *plan.max : SIZE_MAX;
  // Optional items from position `start` on: the prefix ones nested, then the rest repeated.
  ExprId chain = ir_.empty();
  if (limit > std::max(k, start)) {
    ExprId one = ir_.seq({comma, item(std::max(k, start))});
    chain = plan.max ? ir_.repeat(one, 0, uint32_t(limit - std::max(k, start))) : ir_.star(one);
  }
  for (size_t j = std::min(k, limit); j-- > start;)
    chain = ir_.optional(ir_.seq({comma, item(j), chain}));
  std::vector<ExprId> body = {item(0)};
  for (size_t j = 1; j < start; ++j) body.push_back(ir_.seq({comma, item(j)}));
  body.push_back(chain);
  ExprId nonempty = ir_.seq(std::move(body));
  return ir_.seq({open, plan.min == 0 ? ir_.optional(nonempty) : nonempty, close});
}

ExprId SchemaCompiler::string(const Json& s, const std::string& path) {
  std::optional<uint32_t> min = count_field(s, "minLength", path),
                          max = count_field(s, "maxLength", path);
  if (min && max && *min > *max)
    grammar_fail(path, "minLength", "minLength {} is above maxLength {}", *min, *max);
  std::optional<std::string> pattern = string_field(s, "pattern", path);
  std::optional<std::string> format = string_field(s, "format", path);
  if (!pattern && !format) return json_.string_of_length(min.value_or(0), max);
  if (pattern && format)
    grammar_fail(path, "pattern", "'pattern' together with 'format' is not supported");
  std::optional<std::string> regex = pattern ? pattern : format_regex(*format);
  if (!regex)
    grammar_fail(path, "format",
                 "format '{}' is not supported (date, time, date-time, uuid and email are)",
                 *format);
  const char* keyword = pattern ? "pattern" : "format";
  CompiledRegex r = compile_regex(
      ir_, *regex, RegexContext{json_.string_encoder(), bool(pattern), path, keyword});
  // Lengths are enforced beside a regex only where they add nothing: every string of the
  // regex already has a length inside them (^[0-9]{5}$ with maxLength 5, a date with 10).
  if ((min && r.length.min < *min) || (max && (!r.length.max || *r.length.max > *max)))
    grammar_fail(path, min ? "minLength" : "maxLength",
                 "'{}' narrows what '{}' allows, and tandem cannot intersect the two (strings "
                 "of the {} are {} to {} characters long)",
                 min ? "minLength" : "maxLength", keyword, keyword, r.length.min,
                 r.length.max ? std::to_string(*r.length.max) : "any number of");
  return ir_.seq({ir_.literal("\""), r.expr, ir_.literal("\"")});
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
