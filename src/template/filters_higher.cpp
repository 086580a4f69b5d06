// Filters that apply other filters/tests or regroup sequences: map, select, reject,
// selectattr, rejectattr, batch, slice, groupby, random, attr. Like jinja2, map/select/...
// return one-shot generators and treat a falsy input as empty.
#include <algorithm>
#include <random>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/filters.h"
#include "template/interpreter.h"
#include "template/methods.h"
#include "template/operators.h"
#include "template/py_repr.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

ValueList map_items(Interpreter& in, const Value& v, const CallArgs& args) {
  ValueList out;
  if (!v.truthy()) return out;
  if (args.positional.empty()) {
    std::optional<Value> attribute, fallback;
    for (const auto& [k, val] : args.named) {
      if (k == "attribute")
        attribute = val;
      else if (k == "default")
        fallback = val;
      else
        raise(ErrorKind::Filter, "Unexpected keyword argument '{}'", k);
    }
    if (!attribute) raise(ErrorKind::Filter, "map requires a filter argument");
    for (const Value& item : v.iterate())
      out.push_back(get_attribute_path(in, item, *attribute, fallback ? &*fallback : nullptr));
    return out;
  }
  std::string name = py_str(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.named = args.named;
  for (const Value& item : v.iterate()) {
    CallArgs call = rest;
    out.push_back(in.apply_filter(name, item, call));
  }
  return out;
}

Value f_map(Interpreter& in, const Value& v, CallArgs& args) {
  return in.track(
      Value::generator([&in, v, args] { return map_items(in, v, args); }, "sync_do_map"));
}

// select/reject(attr): keep items whose (attribute's) test result, modulo `negate`, holds.
ValueList selected_items(Interpreter& in, const Value& v, const CallArgs& args, bool negate,
                         bool lookup_attr) {
  if (!v.truthy()) return {};
  size_t off = 0;
  Value attribute;
  if (lookup_attr) {
    if (args.positional.empty()) raise(ErrorKind::Filter, "Missing parameter for attribute name");
    attribute = args.positional[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > off) {
    test = py_str(args.positional[off]);
    test_args.positional.assign(args.positional.begin() + off + 1, args.positional.end());
    test_args.named = args.named;
  }
  ValueList out;
  for (const Value& item : v.iterate()) {
    Value subject = lookup_attr ? get_attribute_path(in, item, attribute) : item;
    bool ok;
    if (test) {
      CallArgs call = test_args;
      ok = in.apply_test(*test, subject, call);
    } else {
      ok = subject.truthy();
    }
    if (ok != negate) out.push_back(item);
  }
  return out;
}

Value select_or_reject(Interpreter& in, const Value& v, CallArgs& args, bool negate,
                       bool lookup_attr, const char* origin) {
  return in.track(
      Value::generator([&in, v, args, negate,
                        lookup_attr] { return selected_items(in, v, args, negate, lookup_attr); },
                       origin));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, false, false, "select_or_reject");
}
Value f_reject(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, true, false, "select_or_reject");
}
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, false, true, "select_or_reject");
}
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, true, true, "select_or_reject");
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("batch", args, {"linecount", "fill_with"}, 1);
  int64_t n = a.get_int(0, 1);
  Value fill = a.get_or(1, Value::none());
  return in.track(Value::generator(
      [v, n, fill] {
        ValueList out, tmp;
        for (const Value& item : v.iterate()) {
          if (static_cast<int64_t>(tmp.size()) == n) {
            out.push_back(Value::list(std::move(tmp)));
            tmp.clear();
          }
          tmp.push_back(item);
        }
        if (!tmp.empty()) {
          if (!fill.is_none())
            while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(fill);
          out.push_back(Value::list(std::move(tmp)));
        }
        return out;
      },
      "do_batch"));
}

Value f_slice(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("slice", args, {"slices", "fill_with"}, 1);
  int64_t slices = a.get_int(0, 1);
  Value fill = a.get_or(1, Value::none());
  return in.track(Value::generator(
      [v, slices, fill] {
        ValueList seq = v.iterate(), out;
        if (slices <= 0) raise(ErrorKind::ZeroDivision, "integer division or modulo by zero");
        int64_t length = static_cast<int64_t>(seq.size());
        int64_t per = length / slices, extra = length % slices, offset = 0;
        for (int64_t k = 0; k < slices; ++k) {
          int64_t start = offset + k * per;
          if (k < extra) ++offset;
          int64_t end = offset + (k + 1) * per;
          ValueList tmp(seq.begin() + start, seq.begin() + end);
          if (!fill.is_none() && k >= extra) tmp.push_back(fill);
          out.push_back(Value::list(std::move(tmp)));
        }
        return out;
      },
      "sync_do_slice"));
}

Value f_groupby(Interpreter& in, const Value& v, CallArgs& args) {
  BoundArgs a("groupby", args, {"attribute", "default", "case_sensitive"}, 1);
  bool case_sensitive = a.get_bool(2, false);
  const Value* fallback = a.has(1) ? &a.get(1) : nullptr;
  ValueList items = v.iterate();
  std::vector<Value> keys;
  for (const Value& item : items) {
    Value k = get_attribute_path(in, item, a.get(0), fallback);
    keys.push_back(!case_sensitive && k.is_string() ? Value::string(unicode::lower(k.as_string()))
                                                    : k);
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return py_less(keys[x], keys[y]); });
  ValueList groups;
  for (size_t i = 0; i < order.size();) {
    ValueList members;
    size_t j = i;
    while (j < order.size() && py_equal(keys[order[j]], keys[order[i]]))
      members.push_back(items[order[j++]]);
    Value grouper =
        case_sensitive ? keys[order[i]] : get_attribute_path(in, members[0], a.get(0), fallback);
    groups.push_back(Value::list({grouper, Value::list(std::move(members))}, ListFlavor::Group));
    i = j;
  }
  return Value::list(std::move(groups));
}

Value f_random(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("random", args);
  ValueList items = v.iterate();
  if (items.empty()) {
    UndefinedInfo info;
    info.hint = "No random item, sequence was empty.";
    return Value::undefined(std::move(info));
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)];
}

Value f_attr(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("attr", args, {"name"}, 1);
  if (v.is_undefined()) fail_undefined(v);
  std::string name = py_str(a.get(0));
  if (auto attr = python_attribute(v, name)) return *attr;
  UndefinedInfo info;
  info.has_owner = true;
  info.owner = object_type_repr(v);
  info.name = name;
  return Value::undefined(std::move(info));
}

}  // namespace

const FilterTable& higher_order_filters() {
  static const FilterTable table = {
      {"map", f_map},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"batch", f_batch},
      {"slice", f_slice},
      {"groupby", f_groupby},
      {"random", f_random},
      {"attr", f_attr},
  };
  return table;
}

}  // namespace tandem::jinja
