// Expression evaluation with Python semantics: `and`/`or` return operands, comparisons chain,
// `~` joins str() of each side, filters/tests by name, calls through the sandbox.
#include "template/errors.h"
#include "template/filters.h"
#include "template/globals.h"
#include "template/interpreter.h"
#include "template/methods.h"
#include "template/operators.h"
#include "template/predicates.h"
#include "template/py_repr.h"
#include "template/render_budget.h"

namespace tandem::jinja {

template <typename T>
static const T& as(const Expr& e) {
  return static_cast<const T&>(e);
}

Value Interpreter::lookup(const std::string& name) {
  for (Scope* s = scope_.get(); s; s = s->parent.get())
    if (Value* v = s->find_local(name)) return *v;
  if (const Value* g = find_global(name)) return *g;
  UndefinedInfo info;
  info.name = name;
  return Value::undefined(std::move(info));
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Const:
      return as<ConstExpr>(e).value;
    case ExprKind::Name:
      return lookup(as<NameExpr>(e).name);
    case ExprKind::Tuple:
    case ExprKind::List:
    case ExprKind::Dict:
      return eval_literal(e);
    case ExprKind::Getattr: {
      const auto& g = as<GetattrExpr>(e);
      return getattr(eval(*g.obj), g.attr);
    }
    case ExprKind::Getitem:
      return eval_getitem(as<GetitemExpr>(e));
    case ExprKind::Call:
      return eval_call(as<CallExpr>(e));
    case ExprKind::Filter:
      return eval_filter(as<FilterExpr>(e), nullptr);
    case ExprKind::Test:
      return eval_test(as<FilterExpr>(e));
    case ExprKind::Neg:
    case ExprKind::Pos:
      return negate(eval(*as<UnaryExpr>(e).operand), e.kind == ExprKind::Neg);
    case ExprKind::Binary: {
      const auto& b = as<BinaryExpr>(e);
      Value left = eval(*b.left);
      return binary_op(b.op, left, eval(*b.right));
    }
    case ExprKind::Not:
    case ExprKind::And:
    case ExprKind::Or:
    case ExprKind::CondExpr:
      return eval_logic(e);
    case ExprKind::Concat: {
      std::string out;
      for (const auto& item : as<ConcatExpr>(e).items) append_charged(out, py_str(eval(*item)));
      return Value::string(std::move(out));
    }
    case ExprKind::Compare:
      return eval_compare(as<CompareExpr>(e));
    case ExprKind::NSRef:
    case ExprKind::Slice:
      break;
  }
  raise(ErrorKind::Runtime, "expression cannot be evaluated here");
}

Value Interpreter::eval_literal(const Expr& e) {
  if (e.kind != ExprKind::Dict) {
    ValueList items;
    for (const auto& item : as<SeqExpr>(e).items) items.push_back(eval(*item));
    return Value::list(std::move(items),
                       e.kind == ExprKind::Tuple ? ListFlavor::Tuple : ListFlavor::List);
  }
  DictData d;
  for (const auto& [k, v] : as<DictExpr>(e).pairs) {
    Value key = eval(*k);
    if (key.is_dict() || (key.is_list() && key.flavor() != ListFlavor::Tuple))
      raise(ErrorKind::Type, "unhashable type: '{}'", key.type_name());
    d.set(std::move(key), eval(*v));
  }
  return Value::dict(std::move(d));
}

// not / and / or (returning an operand, as Python) / inline if.
Value Interpreter::eval_logic(const Expr& e) {
  if (e.kind == ExprKind::Not) return Value::boolean(!eval(*as<UnaryExpr>(e).operand).truthy());
  if (e.kind == ExprKind::CondExpr) {
    const auto& c = as<CondExpr>(e);
    if (eval(*c.test).truthy()) return eval(*c.expr1);
    if (c.expr2) return eval(*c.expr2);
    UndefinedInfo info;
    info.hint = fmt::format(
        "the inline if-expression on line {} evaluated to false and no else "
        "section was defined.",
        e.line);
    return Value::undefined(std::move(info));
  }
  const auto& b = as<BinaryExpr>(e);
  Value left = eval(*b.left);
  bool take_left = e.kind == ExprKind::And ? !left.truthy() : left.truthy();
  return take_left ? left : eval(*b.right);
}

Value Interpreter::eval_test(const FilterExpr& t) {
  Value subject = eval(*t.node);
  CallArgs args = eval_args(t.args);
  if (!find_test(t.name)) raise(ErrorKind::Runtime, "No test named '{}' found.", t.name);
  return Value::boolean(apply_test(t.name, subject, args));
}

// obj[key] goes through the sandbox; obj[a:b:c] does not (jinja2 compiles slices to a plain
// Python subscript), so slicing a non-sequence raises instead of giving undefined.
Value Interpreter::eval_getitem(const GetitemExpr& e) {
  Value obj = eval(*e.obj);
  if (e.index->kind != ExprKind::Slice) return getitem(obj, eval(*e.index));
  const auto& s = as<SliceExpr>(*e.index);
  Value start = s.start ? eval(*s.start) : Value::none();
  Value stop = s.stop ? eval(*s.stop) : Value::none();
  Value step = s.step ? eval(*s.step) : Value::none();
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) raise(ErrorKind::Type, "unhashable type: 'slice'");
  bool sliceable =
      obj.is_string() ||
      (obj.is_list() && (obj.flavor() == ListFlavor::List || obj.flavor() == ListFlavor::Tuple ||
                         obj.flavor() == ListFlavor::Range || obj.flavor() == ListFlavor::Group));
  if (!sliceable) raise(ErrorKind::Type, "'{}' object is not subscriptable", obj.type_name());
  return slice_value(obj, start, stop, step);
}

Value Interpreter::eval_compare(const CompareExpr& e) {
  Value left = eval(*e.first);
  for (const auto& [op, expr] : e.ops) {
    Value right = eval(*expr);
    if (!compare(op, left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

CallArgs Interpreter::eval_args(const CallArgsExpr& a) {
  CallArgs out;
  for (const auto& arg : a.args) out.positional.push_back(eval(*arg));
  for (const auto& [k, v] : a.kwargs) out.named.emplace_back(k, eval(*v));
  if (a.dyn_args) {
    for (const Value& v : eval(*a.dyn_args).iterate()) out.positional.push_back(v);
  }
  if (a.dyn_kwargs) {
    Value d = eval(*a.dyn_kwargs);
    if (!d.is_dict())
      raise(ErrorKind::Type, "argument after ** must be a mapping, not {}", d.type_name());
    for (const auto& [k, v] : d.as_dict().entries) out.named.emplace_back(py_str(k), v);
  }
  return out;
}

Value Interpreter::eval_call(const CallExpr& e) {
  // obj.method(...) on builtin types calls the method directly (the attribute wins over items).
  if (e.callee->kind == ExprKind::Getattr) {
    const auto& g = as<GetattrExpr>(*e.callee);
    Value obj = eval(*g.obj);
    if (obj.is_undefined()) fail_undefined(obj);
    if (obj.kind() != Kind::Object && method_safety(obj, g.attr) == MethodSafety::Safe) {
      CallArgs args = eval_args(e.args);
      return call_method(*this, obj, g.attr, args);
    }
    Value callee = getattr(obj, g.attr);
    CallArgs args = eval_args(e.args);
    return call(callee, args);
  }
  Value callee = eval(*e.callee);
  CallArgs args = eval_args(e.args);
  return call(callee, args);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.kind() == Kind::Object) {
    if (auto result = callee.as_object().call(*this, args)) return *result;
  }
  if (callee.kind() != Kind::Callable)
    raise(ErrorKind::Type, "'{}' object is not callable", callee.type_name());
  return callee.as_callable().fn(*this, args);
}

Value Interpreter::eval_filter(const FilterExpr& e, const Value* block_input) {
  Value input;
  if (e.node) {
    input = e.node->kind == ExprKind::Filter ? eval_filter(as<FilterExpr>(*e.node), block_input)
                                             : eval(*e.node);
  } else if (block_input) {
    input = *block_input;
  }
  CallArgs args = eval_args(e.args);
  if (!find_filter(e.name)) raise(ErrorKind::Runtime, "No filter named '{}' found.", e.name);
  return apply_filter(e.name, input, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  FilterFn f = find_filter(name);
  if (!f) raise(ErrorKind::Runtime, "No filter named '{}'.", name);
  return f(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) raise(ErrorKind::Runtime, "No test named '{}'.", name);
  return t(*this, input, args);
}

}  // namespace tandem::jinja
