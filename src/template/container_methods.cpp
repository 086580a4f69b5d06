// Safe methods of dict, list, tuple, range and numbers.
#include <cmath>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/methods.h"
#include "template/operators.h"
#include "template/py_repr.h"

namespace tandem::jinja {
namespace {

Value dict_view(const DictData& d, ListFlavor flavor) {
  ValueList items;
  items.reserve(d.entries.size());
  for (const auto& [k, v] : d.entries) {
    if (flavor == ListFlavor::DictKeys)
      items.push_back(k);
    else if (flavor == ListFlavor::DictValues)
      items.push_back(v);
    else
      items.push_back(Value::tuple({k, v}));
  }
  return Value::list(std::move(items), flavor);
}

void check_hashable(const Value& key) {
  bool unhashable = key.is_dict() || (key.is_list() && key.flavor() != ListFlavor::Tuple &&
                                      key.flavor() != ListFlavor::Range);
  if (unhashable) raise(ErrorKind::Type, "unhashable type: '{}'", key.type_name());
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  const DictData& d = self.as_dict();
  if (name == "get") {
    BoundArgs a("get", args, {"key", "default"}, 1);
    check_hashable(a.get(0));
    const Value* v = d.find(a.get(0));
    return v ? *v : a.get_or(1, Value::none());
  }
  if (name == "copy") {
    expect_no_args("copy", args);
    return self;  // immutable sandbox: sharing is a faithful copy
  }
  if (name == "fromkeys") {
    BoundArgs a("fromkeys", args, {"iterable", "value"}, 1);
    DictData out;
    for (const Value& k : a.get(0).iterate()) out.set(k, a.get_or(1, Value::none()));
    return Value::dict(std::move(out));
  }
  expect_no_args(name, args);
  if (name == "items") return dict_view(d, ListFlavor::DictItems);
  if (name == "keys") return dict_view(d, ListFlavor::DictKeys);
  return dict_view(d, ListFlavor::DictValues);
}

Value sequence_method(const Value& self, const std::string& name, CallArgs& args) {
  const ValueList& items = self.as_list().items;
  if (name == "copy") {
    expect_no_args("copy", args);
    return Value::list(items);
  }
  if (name == "count") {
    BoundArgs a("count", args, {"value"}, 1);
    int64_t n = 0;
    for (const Value& v : items) n += py_equal(v, a.get(0));
    return Value::integer(n);
  }
  BoundArgs a("index", args, {"value", "start", "stop"}, 1);
  int64_t size = static_cast<int64_t>(items.size());
  auto clamp = [&](int64_t i) {
    if (i < 0) i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  int64_t start = clamp(a.get_int(1, 0)), stop = clamp(a.get_int(2, size));
  for (int64_t i = start; i < stop; ++i)
    if (py_equal(items[i], a.get(0))) return Value::integer(i);
  raise(ErrorKind::Value, "{} is not in {}", py_repr(a.get(0)), self.type_name());
}

Value number_method(const Value& self, const std::string& name, CallArgs& args) {
  expect_no_args(name, args);
  if (name == "conjugate") return self.kind() == Kind::Float ? self : Value::integer(self.as_int());
  if (name == "is_integer") {
    return Value::boolean(self.kind() != Kind::Float ||
                          std::floor(self.as_float()) == self.as_float());
  }
  if (name == "bit_length" || name == "bit_count") {
    uint64_t mag = self.as_int() < 0 ? 0 - static_cast<uint64_t>(self.as_int()) : self.as_int();
    int64_t n = 0;
    if (name == "bit_count") {
      n = __builtin_popcountll(mag);
    } else {
      while (mag) {
        ++n;
        mag >>= 1;
      }
    }
    return Value::integer(n);
  }
  raise(ErrorKind::Type, "{}.{}() is not supported", self.type_name(), name);
}

}  // namespace

Value call_container_method(Interpreter&, const Value& self, const std::string& name,
                            CallArgs& args) {
  if (self.is_dict()) return dict_method(self, name, args);
  if (self.is_list()) return sequence_method(self, name, args);
  if (self.is_number()) return number_method(self, name, args);
  raise(ErrorKind::Type, "'{}' object has no method '{}'", self.type_name(), name);
}

}  // namespace tandem::jinja
