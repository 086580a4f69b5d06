#include "template/predicates.h"

#include <map>
#include <string>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/filters.h"
#include "template/operators.h"
#include "template/py_repr.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

const Value& one_arg(const char* name, CallArgs& args, std::optional<BoundArgs>& holder) {
  holder.emplace(name, args, std::initializer_list<const char*>{"other"}, 1);
  return holder->get(0);
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("defined", a);
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("undefined", a);
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("none", a);
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("boolean", a);
  return v.kind() == Kind::Bool;
}
bool t_true(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("true", a);
  return v.kind() == Kind::Bool && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("false", a);
  return v.kind() == Kind::Bool && !v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("integer", a);
  return v.kind() == Kind::Int;
}
bool t_float(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("float", a);
  return v.kind() == Kind::Float;
}
bool t_number(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("number", a);
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("string", a);
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("mapping", a);
  return v.is_dict();
}
bool t_escaped(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("escaped", a);
  return v.is_string() && v.is_safe();
}

// len() and __getitem__: str, list, tuple, range, dict, and (quirk) undefined.
bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("sequence", a);
  if (v.is_string() || v.is_dict() || v.is_undefined()) return true;
  if (!v.is_list()) return false;
  ListFlavor f = v.flavor();
  return f == ListFlavor::List || f == ListFlavor::Tuple || f == ListFlavor::Range ||
         f == ListFlavor::Group;
}

bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("iterable", a);
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::String:
    case Kind::List:
    case Kind::Dict:
    case Kind::Iterator:
      return true;
    default:
      return false;
  }
}

// Macros, builtins, bound methods, joiners, loop objects (recursive call) and undefined.
bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("callable", a);
  if (v.kind() == Kind::Callable || v.is_undefined()) return true;
  return v.kind() == Kind::Object &&
         v.as_object().type_repr() == "jinja2.runtime.LoopContext object";
}

bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("lower", a);
  std::string s = py_str(v);
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = unicode::next(s, pos);
    if (unicode::is_upper(c)) return false;
    cased = cased || unicode::is_lower(c);
  }
  return cased;
}

bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("upper", a);
  std::string s = py_str(v);
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = unicode::next(s, pos);
    if (unicode::is_lower(c)) return false;
    cased = cased || unicode::is_upper(c);
  }
  return cased;
}

bool mod_equals(const Value& v, const Value& divisor, int64_t want) {
  return py_equal(binary_op(BinOp::Mod, v, divisor), Value::integer(want));
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("odd", a);
  return mod_equals(v, Value::integer(2), 1);
}
bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("even", a);
  return mod_equals(v, Value::integer(2), 0);
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  BoundArgs b("divisibleby", a, {"num"}, 1);
  return mod_equals(v, b.get(0), 0);
}

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("filter", a);
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  expect_no_args("test", a);
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  std::optional<BoundArgs> h;
  return v.same_object(one_arg("sameas", a, h));
}

bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  std::optional<BoundArgs> h;
  return contains(one_arg("in", a, h), v);
}

template <CmpOp Op>
bool t_compare(Interpreter&, const Value& v, CallArgs& a) {
  std::optional<BoundArgs> h;
  return compare(Op, v, one_arg("compare", a, h));
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"filter", t_filter},
      {"test", t_test},
      {"none", t_none},
      {"boolean", t_boolean},
      {"false", t_false},
      {"true", t_true},
      {"integer", t_integer},
      {"float", t_float},
      {"lower", t_lower},
      {"upper", t_upper},
      {"string", t_string},
      {"mapping", t_mapping},
      {"number", t_number},
      {"sequence", t_sequence},
      {"iterable", t_iterable},
      {"callable", t_callable},
      {"sameas", t_sameas},
      {"escaped", t_escaped},
      {"in", t_in},
      {"==", t_compare<CmpOp::Eq>},
      {"eq", t_compare<CmpOp::Eq>},
      {"equalto", t_compare<CmpOp::Eq>},
      {"!=", t_compare<CmpOp::Ne>},
      {"ne", t_compare<CmpOp::Ne>},
      {">", t_compare<CmpOp::Gt>},
      {"gt", t_compare<CmpOp::Gt>},
      {"greaterthan", t_compare<CmpOp::Gt>},
      {">=", t_compare<CmpOp::GtEq>},
      {"ge", t_compare<CmpOp::GtEq>},
      {"<", t_compare<CmpOp::Lt>},
      {"lt", t_compare<CmpOp::Lt>},
      {"lessthan", t_compare<CmpOp::Lt>},
      {"<=", t_compare<CmpOp::LtEq>},
      {"le", t_compare<CmpOp::LtEq>},
  };
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace tandem::jinja
