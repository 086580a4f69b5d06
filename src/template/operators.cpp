#include "template/operators.h"

#include <cmath>
#include <optional>

#include "template/errors.h"
#include "template/py_format.h"
#include "template/py_repr.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::Add:
      return "+";
    case BinOp::Sub:
      return "-";
    case BinOp::Mul:
      return "*";
    case BinOp::Div:
      return "/";
    case BinOp::FloorDiv:
      return "//";
    case BinOp::Mod:
      return "%";
    case BinOp::Pow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  raise(ErrorKind::Type, "unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op),
        a.type_name(), b.type_name());
}

bool is_int_like(const Value& v) {
  return v.kind() == Kind::Int || v.kind() == Kind::Bool;
}

// a OP b with overflow reported as Python would not (our ints are 64-bit).
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) raise(ErrorKind::Overflow, "integer result too large for this implementation");
  return r;
}
constexpr auto kAdd = [](int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
};
constexpr auto kSub = [](int64_t a, int64_t b, int64_t* r) {
  return __builtin_sub_overflow(a, b, r);
};
constexpr auto kMul = [](int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
};

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) raise(ErrorKind::ZeroDivision, "0.0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = checked(kMul, result, base);
    exp >>= 1;
    if (exp > 0) base = checked(kMul, base, base);
  }
  return Value::integer(result);
}

Value int_op(BinOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinOp::Add:
      return Value::integer(checked(kAdd, a, b));
    case BinOp::Sub:
      return Value::integer(checked(kSub, a, b));
    case BinOp::Mul:
      return Value::integer(checked(kMul, a, b));
    case BinOp::Div:
      if (b == 0) raise(ErrorKind::ZeroDivision, "division by zero");
      return Value::number(static_cast<double>(a) / static_cast<double>(b));
    case BinOp::FloorDiv:
      if (b == 0) raise(ErrorKind::ZeroDivision, "integer division or modulo by zero");
      return Value::integer(floor_div(a, b));
    case BinOp::Mod:
      if (b == 0) raise(ErrorKind::ZeroDivision, "integer modulo by zero");
      return Value::integer(a - floor_div(a, b) * b);
    case BinOp::Pow:
      return int_pow(a, b);
  }
  return Value::none();
}

Value float_op(BinOp op, double a, double b) {
  switch (op) {
    case BinOp::Add:
      return Value::number(a + b);
    case BinOp::Sub:
      return Value::number(a - b);
    case BinOp::Mul:
      return Value::number(a * b);
    case BinOp::Div:
      if (b == 0) raise(ErrorKind::ZeroDivision, "float division by zero");
      return Value::number(a / b);
    case BinOp::FloorDiv:
      if (b == 0) raise(ErrorKind::ZeroDivision, "float floor division by zero");
      return Value::number(std::floor(a / b));
    case BinOp::Mod: {
      if (b == 0) raise(ErrorKind::ZeroDivision, "float modulo");
      double m = std::fmod(a, b);
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      if (m == 0) m = std::copysign(0.0, b);  // Python: a zero remainder takes b's sign
      return Value::number(m);
    }
    case BinOp::Pow: {
      if (a == 0 && b < 0)
        raise(ErrorKind::ZeroDivision, "0.0 cannot be raised to a negative power");
      if (a < 0 && std::isfinite(b) && std::floor(b) != b)
        raise(ErrorKind::Type, "complex results ({} ** {}) are not supported", float_repr(a),
              float_repr(b));
      double r = std::pow(a, b);
      if (std::isinf(r) && std::isfinite(a) && std::isfinite(b))
        raise(ErrorKind::Overflow, "(34, 'Numerical result out of range')");
      return Value::number(r);
    }
  }
  return Value::none();
}

std::string repeat(const std::string& s, int64_t n) {
  if (n > 0) charge_render(saturating_product(size_t(n), s.size()));
  std::string out;
  for (int64_t i = 0; i < n; ++i) out += s;
  return out;
}

Value add_strings(const Value& a, const Value& b) {
  if (a.is_safe() || b.is_safe()) {  // Markup + str escapes the plain side
    std::string left = a.is_safe() ? a.as_string() : html_escape(a.as_string());
    std::string right = b.is_safe() ? b.as_string() : html_escape(b.as_string());
    return Value::string(left + right, true);
  }
  return Value::string(a.as_string() + b.as_string());
}

Value add(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return add_strings(a, b);
  if (a.is_string() && !a.is_safe())
    raise(ErrorKind::Type, "can only concatenate str (not \"{}\") to str", b.type_name());
  if (a.is_list() && b.is_list() && a.flavor() == b.flavor() &&
      (a.flavor() == ListFlavor::List || a.flavor() == ListFlavor::Tuple)) {
    ValueList items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value::list(std::move(items), a.flavor());
  }
  if (a.is_list() && (a.flavor() == ListFlavor::List || a.flavor() == ListFlavor::Tuple))
    raise(ErrorKind::Type, "can only concatenate {} (not \"{}\") to {}", a.type_name(),
          b.type_name(), a.type_name());
  unsupported(BinOp::Add, a, b);
}

Value multiply_sequence(const Value& seq, const Value& count) {
  int64_t n = count.as_int();
  if (seq.is_string()) return Value::string(repeat(seq.as_string(), n), seq.is_safe());
  if (n > 0)
    charge_render(saturating_product(size_t(n), seq.as_list().items.size() * sizeof(Value)));
  ValueList items;
  for (int64_t i = 0; i < n; ++i)
    items.insert(items.end(), seq.as_list().items.begin(), seq.as_list().items.end());
  return Value::list(std::move(items), seq.flavor());
}

bool is_repeatable(const Value& v) {
  return v.is_string() ||
         (v.is_list() && (v.flavor() == ListFlavor::List || v.flavor() == ListFlavor::Tuple));
}

}  // namespace

void fail_undefined(const Value& undefined) {
  const UndefinedInfo* info = undefined.undefined_info();
  if (!info) raise(ErrorKind::Undefined, "'Undefined' is undefined");
  raise(info->security ? ErrorKind::Security : ErrorKind::Undefined, info->message());
}

Value binary_op(BinOp op, const Value& a, const Value& b) {
  // str % x is str.__mod__ even for an undefined x (which acts as an empty mapping).
  if (op == BinOp::Mod && a.is_string()) return percent_format(a, b);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float)
      return float_op(op, a.as_float(), b.as_float());
    return int_op(op, a.as_int(), b.as_int());
  }
  switch (op) {
    case BinOp::Add:
      return add(a, b);
    case BinOp::Mul:
      if (is_repeatable(a) && is_int_like(b)) return multiply_sequence(a, b);
      if (is_int_like(a) && is_repeatable(b)) return multiply_sequence(b, a);
      if (is_repeatable(a) || is_repeatable(b))
        raise(ErrorKind::Type, "can't multiply sequence by non-int of type '{}'",
              (is_repeatable(a) ? b : a).type_name());
      break;
    default:
      break;
  }
  unsupported(op, a, b);
}

int64_t float_to_int(double f) {
  if (std::isnan(f)) raise(ErrorKind::Value, "cannot convert float NaN to integer");
  const double t = std::trunc(f);
  // [-2^63, 2^63): both bounds are exact doubles.
  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0))
    raise(ErrorKind::Overflow, "cannot convert float {} to a 64-bit integer", f);
  return static_cast<int64_t>(t);
}

Value negate(const Value& v, bool negative) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() == Kind::Float) return Value::number(negative ? -v.as_float() : v.as_float());
  if (is_int_like(v)) return Value::integer(negative ? -v.as_int() : v.as_int());
  raise(ErrorKind::Type, "bad operand type for unary {}: '{}'", negative ? '-' : '+',
        v.type_name());
}

namespace {

// a < b, or nullopt when Python would raise (unorderable types).
std::optional<bool> try_less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps order
  if (a.is_list() && b.is_list() && a.flavor() == b.flavor() &&
      (a.flavor() == ListFlavor::List || a.flavor() == ListFlavor::Tuple)) {
    const ValueList& x = a.as_list().items;
    const ValueList& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return std::nullopt;
}

// a OP b for the four orderings, with Python's message naming the operator as written.
bool ordering(CmpOp op, const Value& a, const Value& b) {
  bool swap = op == CmpOp::Gt || op == CmpOp::LtEq;  // a > b == b < a; a <= b == !(b < a)
  auto less = swap ? try_less(b, a) : try_less(a, b);
  if (!less) {
    const char* sym = op == CmpOp::Lt     ? "<"
                      : op == CmpOp::Gt   ? ">"
                      : op == CmpOp::LtEq ? "<="
                                          : ">=";
    raise(ErrorKind::Type, "'{}' not supported between instances of '{}' and '{}'", sym,
          a.type_name(), b.type_name());
  }
  switch (op) {
    case CmpOp::Lt:
    case CmpOp::Gt:
      return *less;
    default:
      return !*less;  // <= is !(b < a), >= is !(a < b)
  }
}

}  // namespace

bool py_less(const Value& a, const Value& b) {
  if (auto less = try_less(a, b)) return *less;
  raise(ErrorKind::Type, "'<' not supported between instances of '{}' and '{}'", a.type_name(),
        b.type_name());
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq:
      return py_equal(a, b);
    case CmpOp::Ne:
      return !py_equal(a, b);
    case CmpOp::Lt:
    case CmpOp::Gt:
    case CmpOp::LtEq:
    case CmpOp::GtEq:
      return ordering(op, a, b);
    case CmpOp::In:
      return contains(b, a);
    case CmpOp::NotIn:
      return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;  // iterates empty
    case Kind::String:
      if (!item.is_string())
        raise(ErrorKind::Type, "'in <string>' requires string as left operand, not {}",
              item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::Dict:
      if (item.is_list() && item.flavor() != ListFlavor::Tuple)
        raise(ErrorKind::Type, "unhashable type: '{}'", item.type_name());
      if (item.is_dict()) raise(ErrorKind::Type, "unhashable type: 'dict'");
      return container.as_dict().find(item) != nullptr;
    case Kind::List:
    case Kind::Iterator:
      for (const Value& v : container.iterate())
        if (v.same_object(item) || py_equal(v, item)) return true;
      return false;
    default:
      raise(ErrorKind::Type, "argument of type '{}' is not iterable", container.type_name());
  }
}

}  // namespace tandem::jinja
