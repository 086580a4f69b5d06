// jinja2's sandboxed attribute and item access:
//   obj.name  -> Python attribute first (methods), then obj['name'], else undefined;
//   obj[key]  -> item first, then (for str keys) the Python attribute, else undefined.
// Attributes that are unsafe (dunders, mutating list/dict methods) become an undefined that
// raises SecurityError when used. Accessing anything on an undefined raises UndefinedError.
#include <cmath>

#include "template/errors.h"
#include "template/interpreter.h"
#include "template/methods.h"
#include "template/operators.h"
#include "template/py_repr.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

Value missing_attribute(const Value& obj, const std::string& name) {
  UndefinedInfo info;
  info.has_owner = true;
  info.owner = object_type_repr(obj);
  info.name = name;
  return Value::undefined(std::move(info));
}

Value missing_element(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.as_string());
  UndefinedInfo info;
  info.has_owner = true;
  info.owner = object_type_repr(obj);
  info.name = py_repr(key);
  info.name_is_str = false;
  return Value::undefined(std::move(info));
}

Value unsafe_attribute(const Value& obj, const std::string& name) {
  UndefinedInfo info;
  info.hint =
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.type_name());
  info.name = name;
  info.security = true;
  return Value::undefined(std::move(info));
}

Value bound_method(const Value& self, const std::string& name) {
  std::string repr = fmt::format("<built-in method {} of {} object>", name, self.type_name());
  return Value::callable(
      name,
      [self, name](Interpreter& in, CallArgs& args) { return call_method(in, self, name, args); },
      std::move(repr));
}

// Number attributes that are plain values rather than methods.
std::optional<Value> number_attribute(const Value& obj, const std::string& name) {
  if (!obj.is_number()) return std::nullopt;
  if (name == "real") return obj.kind() == Kind::Float ? obj : Value::integer(obj.as_int());
  if (name == "imag") return obj.kind() == Kind::Float ? Value::number(0) : Value::integer(0);
  if (obj.kind() != Kind::Float && name == "numerator") return Value::integer(obj.as_int());
  if (obj.kind() != Kind::Float && name == "denominator") return Value::integer(1);
  return std::nullopt;
}

}  // namespace

std::optional<Value> python_attribute(const Value& obj, const std::string& name) {
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return unsafe_attribute(obj, name);
  if (obj.kind() == Kind::Object) {
    auto v = obj.as_object().get_attr(name);
    if (v && !name.empty() && name[0] == '_') return unsafe_attribute(obj, name);
    return v;
  }
  if (auto v = number_attribute(obj, name)) return v;
  if (obj.is_list() && obj.flavor() == ListFlavor::Group && (name == "grouper" || name == "list"))
    return obj.as_list().items[name == "grouper" ? 0 : 1];
  switch (method_safety(obj, name)) {
    case MethodSafety::Safe:
      return bound_method(obj, name);
    case MethodSafety::Unsafe:
      return unsafe_attribute(obj, name);
    default:
      return std::nullopt;
  }
}

namespace {

// Python index semantics: negative from the end; nullopt when out of range.
std::optional<size_t> normalize_index(const Value& key, size_t size) {
  int64_t i = key.as_int();
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(i);
}

bool is_subscriptable_sequence(const Value& v) {
  if (v.is_string()) return true;
  if (!v.is_list()) return false;
  ListFlavor f = v.flavor();
  return f == ListFlavor::List || f == ListFlavor::Tuple || f == ListFlavor::Range ||
         f == ListFlavor::Group;
}

// obj[key] as Python would do it; nullopt for TypeError/LookupError (jinja2 then falls back).
std::optional<Value> python_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(key);
    return v ? std::optional<Value>(*v) : std::nullopt;
  }
  if (!is_subscriptable_sequence(obj) || !(key.kind() == Kind::Int || key.kind() == Kind::Bool))
    return std::nullopt;
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (unicode::is_ascii(s)) {
      auto i = normalize_index(key, s.size());
      if (!i) return std::nullopt;
      return Value::string(std::string(1, s[*i]), obj.is_safe());
    }
    std::u32string u = unicode::decode(s);
    auto i = normalize_index(key, u.size());
    if (!i) return std::nullopt;
    return Value::string(unicode::encode(u.substr(*i, 1)), obj.is_safe());
  }
  const ValueList& items = obj.as_list().items;
  auto i = normalize_index(key, items.size());
  if (!i) return std::nullopt;
  return items[*i];
}

}  // namespace

std::string object_type_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::None:
      return "None";
    case Kind::Object:
      return v.as_object().type_repr();
    case Kind::String:
      return v.is_safe() ? "markupsafe.Markup object" : "str object";
    case Kind::Callable:
      return "jinja2.runtime.Macro object";
    default:
      return v.type_name() + " object";
  }
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto attr = python_attribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
  }
  return missing_attribute(obj, name);
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto item = python_item(obj, key)) return *item;
  if (key.is_string()) {
    if (auto attr = python_attribute(obj, key.as_string())) return *attr;
  }
  return missing_element(obj, key);
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto index_of = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
      raise(ErrorKind::Type, "slice indices must be integers or None or have an __index__ method");
    return v.as_int();
  };
  int64_t st = index_of(step).value_or(1);
  if (st == 0) raise(ErrorKind::Value, "slice step cannot be zero");
  std::u32string chars;
  bool is_str = obj.is_string();
  if (is_str) chars = unicode::decode(obj.as_string());
  int64_t len = is_str ? static_cast<int64_t>(chars.size())
                       : static_cast<int64_t>(obj.as_list().items.size());
  auto adjust = [&](std::optional<int64_t> v, bool is_start) {
    if (!v) return st < 0 ? (is_start ? len - 1 : -1) : (is_start ? 0 : len);
    int64_t i = *v;
    if (i < 0) {
      i += len;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= len) {
      i = st < 0 ? len - 1 : len;
    }
    return i;
  };
  int64_t a = adjust(index_of(start), true), b = adjust(index_of(stop), false);
  std::vector<int64_t> picks;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) picks.push_back(i);
  if (is_str) {
    std::u32string out;
    for (int64_t i : picks) out.push_back(chars[i]);
    return Value::string(unicode::encode(out), obj.is_safe());
  }
  if (obj.flavor() == ListFlavor::Range) {  // range(...)[a:b:c] is a range again
    const int64_t* r = obj.as_list().range_args;
    return Value::range(r[0] + a * r[2], r[0] + b * r[2], r[2] * st);
  }
  ValueList out;
  for (int64_t i : picks) out.push_back(obj.as_list().items[i]);
  ListFlavor f = obj.flavor() == ListFlavor::Tuple ? ListFlavor::Tuple : ListFlavor::List;
  return Value::list(std::move(out), f);
}

MethodSafety method_safety(const Value& obj, std::string_view name) {
  static const char* const dict_safe[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
  static const char* const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
  static const char* const list_safe[] = {"copy", "count", "index"};
  static const char* const list_unsafe[] = {"append", "clear", "pop",    "reverse",
                                            "insert", "sort",  "extend", "remove"};
  static const char* const float_methods[] = {"is_integer", "conjugate", "hex", "as_integer_ratio"};
  static const char* const int_methods[] = {"bit_length",       "bit_count",  "conjugate",
                                            "as_integer_ratio", "is_integer", "to_bytes"};
  auto in = [&](const auto& names) {
    for (const char* n : names)
      if (name == n) return true;
    return false;
  };
  switch (obj.kind()) {
    case Kind::String:
      return is_str_method(name) ? MethodSafety::Safe : MethodSafety::Missing;
    case Kind::Dict:
      return in(dict_safe)     ? MethodSafety::Safe
             : in(dict_unsafe) ? MethodSafety::Unsafe
                               : MethodSafety::Missing;
    case Kind::List:
      if (obj.flavor() == ListFlavor::List)
        return in(list_safe)     ? MethodSafety::Safe
               : in(list_unsafe) ? MethodSafety::Unsafe
                                 : MethodSafety::Missing;
      if (obj.flavor() == ListFlavor::Tuple || obj.flavor() == ListFlavor::Range ||
          obj.flavor() == ListFlavor::Group)
        return name == "count" || name == "index" ? MethodSafety::Safe : MethodSafety::Missing;
      return MethodSafety::Missing;
    case Kind::Float:
      return in(float_methods) ? MethodSafety::Safe : MethodSafety::Missing;
    case Kind::Int:
    case Kind::Bool:
      return in(int_methods) ? MethodSafety::Safe : MethodSafety::Missing;
    default:
      return MethodSafety::Missing;
  }
}

Value call_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  if (self.is_string()) return call_str_method(in, self, name, args);
  return call_container_method(in, self, name, args);
}

}  // namespace tandem::jinja
