// Sequence filters: first, last, join, list, items, sort, dictsort, unique, min, max, sum,
// reverse. The attribute-path helper shared with filters_higher.cpp.
#include <algorithm>
#include <random>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/filters.h"
#include "template/interpreter.h"
#include "template/methods.h"
#include "template/operators.h"
#include "template/py_repr.h"
#include "template/str_ops.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja {

Value get_attribute_path(Interpreter& in, const Value& item, const Value& attribute,
                         const Value* fallback) {
  Value cur = item;
  auto step = [&](const Value& part) {
    cur = in.getitem(cur, part);
    if (fallback && !fallback->is_none() && cur.is_undefined()) cur = *fallback;
  };
  if (attribute.is_none() || attribute.is_undefined()) return cur;
  if (!attribute.is_string()) {
    step(attribute);
    return cur;
  }
  for (const std::string& part : pystr::split(attribute.as_string(), std::string("."), -1)) {
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    step(digits ? Value::integer(std::stoll(part)) : Value::string(part));
  }
  return cur;
}

namespace {

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(unicode::lower(v.as_string()), v.is_safe()) : v;
}

// Sort key of one item: attribute path(s), lowercased unless case sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  auto one = [&](const Value& attr) {
    Value k = get_attribute_path(in, item, attr);
    return case_sensitive ? k : ignore_case(k);
  };
  if (attribute.is_string() && attribute.as_string().find(',') != std::string::npos) {
    ValueList keys;
    for (const std::string& part : pystr::split(attribute.as_string(), std::string(","), -1))
      keys.push_back(one(Value::string(part)));
    return Value::list(std::move(keys));
  }
  return one(attribute);
}

void sort_by_keys(ValueList& items, ValueList& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? py_less(keys[b], keys[a]) : py_less(keys[a], keys[b]);
  });
  ValueList sorted_items, sorted_keys;
  for (size_t i : order) {
    sorted_items.push_back(items[i]);
    sorted_keys.push_back(keys[i]);
  }
  items = std::move(sorted_items);
  keys = std::move(sorted_keys);
}

Value f_first(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("first", args);
  if (v.kind() == Kind::Iterator) {
    IteratorData& it = v.as_iterator();
    if (it.pos < it.materialize().size()) return it.items[it.pos++];
  } else {
    ValueList items = v.iterate();
    if (!items.empty()) return items.front();
  }
  UndefinedInfo info;
  info.hint = "No first item, sequence was empty.";
  return Value::undefined(std::move(info));
}

Value f_last(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("last", args);
  bool reversible = v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (!reversible) raise(ErrorKind::Type, "'{}' object is not reversible", v.type_name());
  ValueList items = v.iterate();
  if (!items.empty()) return items.back();
  UndefinedInfo info;
  info.hint = "No last item, sequence was empty.";
  return Value::undefined(std::move(info));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("join", args, {"d", "attribute"});
  std::string sep = a.has(0) ? py_str(a.get(0)) : "";
  std::string out;
  bool first = true;
  for (const Value& item : v.iterate()) {
    if (!first) append_charged(out, sep);
    first = false;
    append_charged(out, py_str(a.has(1) ? get_attribute_path(in, item, a.get(1)) : item));
  }
  return Value::string(std::move(out));
}

Value f_list(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("list", args);
  return Value::list(v.iterate());
}

Value f_items(Interpreter& in, const Value& v, CallArgs& args) {
  expect_no_args("items", args);
  return in.track(Value::generator(
      [v] {
        ValueList pairs;
        if (v.is_undefined()) return pairs;
        if (!v.is_dict()) raise(ErrorKind::Type, "Can only get item pairs from a mapping.");
        for (const auto& [k, val] : v.as_dict().entries) pairs.push_back(Value::tuple({k, val}));
        return pairs;
      },
      "do_items"));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  std::string by = a.has(1) ? py_str(a.get(1)) : "key";
  if (by != "key" && by != "value")
    raise(ErrorKind::Filter, "You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) {
    if (v.is_undefined()) fail_undefined(v);
    raise(ErrorKind::Attribute, "'{}' object has no attribute 'items'", v.type_name());
  }
  ValueList items, keys;
  for (const auto& [k, val] : v.as_dict().entries) {
    items.push_back(Value::tuple({k, val}));
    const Value& key = by == "key" ? k : val;
    keys.push_back(a.get_bool(0, false) ? key : ignore_case(key));
  }
  sort_by_keys(items, keys, a.get_bool(2, false));
  return Value::list(std::move(items));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  ValueList items = v.iterate(), keys;
  for (const Value& item : items)
    keys.push_back(sort_key(in, item, a.get_or(2, Value::none()), a.get_bool(1, false)));
  sort_by_keys(items, keys, a.get_bool(0, false));
  return Value::list(std::move(items));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.get_bool(0, false);
  Value attribute = a.get_or(1, Value::none());
  return in.track(Value::generator(
      [&in, v, case_sensitive, attribute] {
        ValueList out, seen;
        for (const Value& item : v.iterate()) {
          Value key = get_attribute_path(in, item, attribute);
          if (!case_sensitive) key = ignore_case(key);
          if (key.is_dict() || (key.is_list() && key.flavor() == ListFlavor::List))
            raise(ErrorKind::Type, "unhashable type: '{}'", key.type_name());
          if (std::none_of(seen.begin(), seen.end(),
                           [&](const Value& s) { return py_equal(s, key); })) {
            seen.push_back(key);
            out.push_back(item);
          }
        }
        return out;
      },
      "sync_do_unique"));
}

Value min_or_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  BoundArgs a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  ValueList items = v.iterate();
  if (items.empty()) {
    UndefinedInfo info;
    info.hint = "No aggregated item, sequence was empty.";
    return Value::undefined(std::move(info));
  }
  size_t best = 0;
  Value best_key = sort_key(in, items[0], a.get_or(1, Value::none()), a.get_bool(0, false));
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(in, items[i], a.get_or(1, Value::none()), a.get_bool(0, false));
    if (want_max ? py_less(best_key, key) : py_less(key, best_key)) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Value f_min(Interpreter& in, const Value& v, CallArgs& args) {
  return min_or_max(in, v, args, false);
}
Value f_max(Interpreter& in, const Value& v, CallArgs& args) {
  return min_or_max(in, v, args, true);
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("sum", args, {"attribute", "start"});
  Value acc = a.get_or(1, Value::integer(0));
  if (acc.is_string()) raise(ErrorKind::Type, "sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : v.iterate())
    acc = binary_op(BinOp::Add, acc, a.has(0) ? get_attribute_path(in, item, a.get(0)) : item);
  return acc;
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs& args) {
  expect_no_args("reverse", args);
  if (v.is_string()) {
    std::u32string u = unicode::decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value::string(unicode::encode(u), v.is_safe());
  }
  bool iterable = v.is_undefined() || v.is_list() || v.is_dict() || v.kind() == Kind::Iterator;
  if (!iterable) raise(ErrorKind::Filter, "argument must be iterable");
  ValueList items = v.iterate();
  std::reverse(items.begin(), items.end());
  if (v.kind() == Kind::Iterator) return Value::list(std::move(items));
  return in.track(Value::iterator(std::move(items), "reversed"));
}

}  // namespace

const FilterTable& sequence_filters() {
  static const FilterTable table = {
      {"first", f_first}, {"last", f_last},         {"join", f_join}, {"list", f_list},
      {"items", f_items}, {"dictsort", f_dictsort}, {"sort", f_sort}, {"unique", f_unique},
      {"min", f_min},     {"max", f_max},           {"sum", f_sum},   {"reverse", f_reverse},
  };
  return table;
}

}  // namespace tandem::jinja
