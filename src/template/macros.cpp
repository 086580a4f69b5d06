// Macros and call blocks, with jinja2's argument rules: positional then keyword arguments,
// missing ones undefined (or their default, evaluated at call time in the macro's scope),
// `varargs`/`kwargs`/`caller` only when the body mentions them. A macro closes over the scope
// it was defined in and returns its rendered body as a plain string.
#include "template/errors.h"
#include "template/interpreter.h"
#include "template/py_repr.h"

namespace tandem::jinja {
Value Interpreter::make_macro(const MacroDef& def) {
  std::shared_ptr<Scope> closure = scope_;
  const MacroDef* d = &def;
  return Value::callable(
      def.name,
      [d, closure](Interpreter& in, CallArgs& args) { return in.call_macro(*d, closure, args); },
      fmt::format("<Macro '{}'>", def.name));
}

Value Interpreter::call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure,
                              CallArgs& args) {
  DepthGuard depth_guard(*this);
  ScopeRestorer restore(*this);
  scope_ = new_scope(closure);
  declare(def.declared);
  bind_macro_args(def, args);
  std::string out;
  exec(def.body, out);
  return Value::string(std::move(out));
}

// Binds parameters (positional, then keyword, then defaults evaluated in the macro's scope,
// else undefined) and the special caller / kwargs / varargs, with jinja2's TypeErrors.
void Interpreter::bind_macro_args(const MacroDef& def, CallArgs& args) {
  size_t num_params = def.params.size();
  size_t first_default = num_params - def.defaults.size();
  std::vector<std::pair<std::string, Value>> kwargs = args.named;
  auto take_kwarg = [&](const std::string& name) -> std::optional<Value> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first != name) continue;
      Value v = std::move(it->second);
      kwargs.erase(it);
      return v;
    }
    return std::nullopt;
  };
  auto missing = [](const std::string& name, std::string hint) {
    UndefinedInfo info;
    info.hint = std::move(hint);
    info.name = name;
    return Value::undefined(std::move(info));
  };
  for (size_t i = 0; i < num_params; ++i) {
    const std::string& name = def.params[i];
    std::optional<Value> v = i < args.positional.size() ? args.positional[i] : take_kwarg(name);
    if (!v && i >= first_default) v = eval(*def.defaults[i - first_default]);
    scope_->set(name, v ? *v : missing(name, fmt::format("parameter '{}' was not provided", name)));
  }
  if (def.uses_caller) {
    std::optional<Value> caller = take_kwarg("caller");
    scope_->set("caller", caller ? *caller : missing("caller", "No caller defined"));
  }
  if (def.uses_kwargs) {
    DictData d;
    for (auto& [k, v] : kwargs) d.set(Value::string(k), v);
    scope_->set("kwargs", Value::dict(std::move(d)));
  } else if (!kwargs.empty()) {
    raise(ErrorKind::Type, "macro '{}' takes no keyword argument '{}'", def.name,
          kwargs.front().first);
  }
  if (def.uses_varargs) {
    ValueList rest;
    for (size_t i = num_params; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope_->set("varargs", Value::tuple(std::move(rest)));
  } else if (args.positional.size() > num_params) {
    raise(ErrorKind::Type, "macro '{}' takes not more than {} argument(s)", def.name, num_params);
  }
}

void Interpreter::exec_call_block(const CallBlockStmt& s, std::string& out) {
  Value caller = make_macro(s.caller);
  if (!s.call) {  // {% generation %}: renders its body through the caller macro
    CallArgs none;
    emit(out, call(caller, none).as_string());
    return;
  }
  const auto& call_expr = static_cast<const CallExpr&>(*s.call);
  Value callee = eval(*call_expr.callee);
  CallArgs args = eval_args(call_expr.args);
  args.named.emplace_back("caller", caller);
  Value result = call(callee, args);
  emit(out, py_str(result));
}

}  // namespace tandem::jinja
