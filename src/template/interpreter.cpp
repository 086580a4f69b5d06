// Statement execution: output, if, for (with loop object, filter, else, break/continue),
// set (names, tuples, namespace attributes), set/filter blocks, with, macros and call blocks.
#include "template/interpreter.h"

#include <nlohmann/json.hpp>

#include "template/errors.h"
#include "template/objects.h"
#include "template/operators.h"
#include "template/py_repr.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

constexpr size_t kMinCollect = 1024;

template <typename T>
const T& as(const Stmt& s) {
  return static_cast<const T&>(s);
}

}  // namespace

Value* Scope::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  if (Value* v = find_local(name)) {
    *v = std::move(value);
  } else {
    vars.emplace_back(std::string(name), std::move(value));
  }
}

Interpreter::Interpreter(const RenderOptions& options, const nlohmann::ordered_json& context,
                         RenderBudget& budget)
    : options_(options), budget_(budget), context_(new_scope(nullptr)) {
  if (!context.is_object() && !context.is_null())
    raise(ErrorKind::Type, "the render context must be a JSON object");
  if (context.is_object())
    for (const auto& [k, v] : context.items()) context_->set(k, Value::from_json(v));
  scope_ = new_scope(context_);
}

Interpreter::~Interpreter() {
  for (Value& v : tracked_) {
    if (v.kind() == Kind::Object) v.as_object().release();
    if (v.kind() == Kind::Iterator) {
      v.as_iterator().producer = nullptr;
      v.as_iterator().items.clear();
    }
  }
  for (auto& s : scopes_) {
    s->vars.clear();
    s->parent.reset();
  }
}

// Scopes and tracked objects are kept to break reference cycles at the render's end, but
// one that nothing else refers to any more cannot be part of a cycle: it is dropped when
// the list doubles, so memory follows what the template holds, not how long it ran.
template <typename T, typename InUse>
void drop_unreferenced(std::vector<T>& kept, size_t& threshold, InUse in_use) {
  if (kept.size() < threshold) return;
  std::erase_if(kept, [&](const T& x) { return !in_use(x); });
  threshold = std::max<size_t>(kMinCollect, 2 * kept.size());
}

// Scopes are not charged to the memory budget: one per iteration at most, each step is
// counted, and the ones no longer referred to are dropped.
std::shared_ptr<Scope> Interpreter::new_scope(std::shared_ptr<Scope> parent) {
  drop_unreferenced(scopes_, scopes_collect_at_,
                    [](const std::shared_ptr<Scope>& s) { return s.use_count() > 1; });
  scopes_.push_back(std::make_shared<Scope>(std::move(parent)));
  return scopes_.back();
}

Value Interpreter::track(Value v) {
  drop_unreferenced(tracked_, tracked_collect_at_,
                    [](const Value& x) { return x.payload_use_count() > 1; });
  tracked_.push_back(v);
  return v;
}

void Interpreter::declare(const Declared& names) {
  for (const std::string& name : names) {
    UndefinedInfo info;
    info.name = name;
    scope_->set(name, Value::undefined(std::move(info)));
  }
}

std::string Interpreter::render(const Program& program) {
  declare(program.declared);
  std::string out;
  exec(program.body, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const StmtList& body, std::string& out) {
  for (const auto& stmt : body) {
    Flow f = exec_stmt(*stmt, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  try {
    switch (s.kind) {
      case StmtKind::Text:
        emit(out, as<TextStmt>(s).text);
        break;
      case StmtKind::Print:
        emit(out, py_str(eval(*as<PrintStmt>(s).expr)));
        break;
      case StmtKind::If:
        return exec_if(as<IfStmt>(s), out);
      case StmtKind::For:
        return exec_for(as<ForStmt>(s), out);
      case StmtKind::Set: {
        const auto& set = as<SetStmt>(s);
        assign(*set.target, eval(*set.value));
        break;
      }
      case StmtKind::SetBlock:
        exec_set_block(as<SetBlockStmt>(s));
        break;
      case StmtKind::Macro: {
        const MacroDef& def = as<MacroStmt>(s).def;
        scope_->set(def.name, make_macro(def));
        break;
      }
      case StmtKind::CallBlock:
        exec_call_block(as<CallBlockStmt>(s), out);
        break;
      case StmtKind::FilterBlock:
        exec_filter_block(as<FilterBlockStmt>(s), out);
        break;
      case StmtKind::With:
        exec_with(as<WithStmt>(s), out);
        break;
      case StmtKind::Autoescape: {
        const auto& a = as<AutoescapeStmt>(s);
        if (eval(*a.enabled).truthy())
          raise(ErrorKind::Runtime, "{{% autoescape true %}} is not supported for chat templates");
        emit(out, render_in_scope(a.body, a.declared));
        break;
      }
      case StmtKind::Fail:
        raise(ErrorKind::Type, "{}", as<FailStmt>(s).message);
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
    }
  } catch (RenderError& e) {
    if (e.line() == 0) e.set_line(s.line);
    throw;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_if(const IfStmt& s, std::string& out) {
  for (const auto& [test, body] : s.branches)
    if (eval(*test).truthy()) return exec(body, out);
  return exec(s.else_body, out);
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& s, std::string& out) {
  return run_loop(s, eval(*s.iter), scope_, 1, out);
}

// One run of a for-loop over `iterable` (depth > 1 for `loop(...)` in recursive loops).
// Bodies run in fresh per-iteration scopes under `outer`, the scope of the for statement.
Interpreter::Flow Interpreter::run_loop(const ForStmt& s, const Value& iterable,
                                        std::shared_ptr<Scope> outer, int depth, std::string& out) {
  ValueList items = iterable.iterate();
  ScopeRestorer restore(*this);
  if (s.filter) {  // `for x in y if cond`: cond sees the target, not the body's variables
    ValueList kept;
    for (const Value& item : items) {
      budget_.step();
      scope_ = new_scope(outer);
      assign(*s.target, item);
      if (eval(*s.filter).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  auto run_else = [&] {
    scope_ = new_scope(outer);
    declare(s.else_declared);
    return exec(s.else_body, out);  // break/continue here belong to an enclosing loop
  };
  if (items.empty()) return run_else();
  LoopObject::Recurse recurse;
  if (s.recursive) {
    recurse = [this, &s, outer, depth](const Value& inner) {
      DepthGuard nested(*this);
      std::string buf;
      run_loop(s, inner, outer, depth + 1, buf);
      return buf;
    };
  }
  auto loop = std::make_shared<LoopObject>(items, depth, std::move(recurse));
  Value loop_value = track(Value::object(loop));
  // jinja2 quirk: `else` also runs when no iteration reached the end of the body (each one
  // hit break/continue first), since its flag is cleared at the end of the body.
  bool body_completed = false;
  for (size_t i = 0; i < items.size(); ++i) {
    budget_.step();
    scope_ = new_scope(outer);
    declare(s.body_declared);
    loop->set_index(i);
    scope_->set("loop", loop_value);
    assign(*s.target, items[i]);
    Flow f = exec(s.body, out);
    body_completed = body_completed || f == Flow::Normal;
    if (f == Flow::Break) break;
  }
  if (!body_completed && !s.else_body.empty()) return run_else();
  return Flow::Normal;
}

void Interpreter::emit(std::string& out, std::string_view text) {
  charge_render(text.size());
  out.append(text);
  budget_.check_output(out.size());
}

Interpreter::DepthGuard::DepthGuard(Interpreter& in) : depth_(in.call_depth_) {
  if (depth_ >= in.budget_.limits().max_depth)
    raise_limit(RenderLimit::Depth,
                fmt::format("maximum recursion depth exceeded (more than {} nested macro calls "
                            "and recursive loops)",
                            in.budget_.limits().max_depth),
                ErrorKind::Recursion);
  ++depth_;
  in.budget_.step();
}

Interpreter::DepthGuard::~DepthGuard() {
  --depth_;
}

ValueList unpack(const Value& value, size_t n) {
  if (value.is_undefined()) fail_undefined(value);
  if (!(value.is_list() || value.is_string() || value.is_dict() || value.kind() == Kind::Iterator))
    raise(ErrorKind::Type, "cannot unpack non-iterable {} object", value.type_name());
  ValueList items = value.iterate();
  if (items.size() > n) raise(ErrorKind::Value, "too many values to unpack (expected {})", n);
  if (items.size() < n)
    raise(ErrorKind::Value, "not enough values to unpack (expected {}, got {})", n, items.size());
  return items;
}

void Interpreter::assign(const Expr& target, const Value& value) {
  switch (target.kind) {
    case ExprKind::Name:
      scope_->set(static_cast<const NameExpr&>(target).name, value);
      return;
    case ExprKind::Tuple: {
      const auto& items = static_cast<const SeqExpr&>(target).items;
      ValueList parts = unpack(value, items.size());
      for (size_t i = 0; i < items.size(); ++i) assign(*items[i], parts[i]);
      return;
    }
    case ExprKind::NSRef: {
      const auto& ref = static_cast<const NSRefExpr&>(target);
      Value ns = lookup(ref.name);
      if (ns.kind() != Kind::Object || !ns.as_object().set_attr(ref.attr, value))
        raise(ErrorKind::Runtime, "cannot assign attribute on non-namespace object");
      return;
    }
    default:
      raise(ErrorKind::Runtime, "cannot assign to this expression");
  }
}

std::string Interpreter::render_in_scope(const StmtList& body, const Declared& declared) {
  ScopeRestorer restore(*this);
  scope_ = new_scope(scope_);
  declare(declared);
  std::string buf;
  exec(body, buf);
  return buf;
}

void Interpreter::exec_set_block(const SetBlockStmt& s) {
  Value body = Value::string(render_in_scope(s.body, s.declared));
  if (s.filter) body = eval_filter(static_cast<const FilterExpr&>(*s.filter), &body);
  assign(*s.target, body);
}

void Interpreter::exec_filter_block(const FilterBlockStmt& s, std::string& out) {
  Value body = Value::string(render_in_scope(s.body, s.declared));
  Value result = eval_filter(static_cast<const FilterExpr&>(*s.filter), &body);
  // jinja2 yields a filter block's result without str(): anything else breaks the final join.
  if (!result.is_string())
    raise(ErrorKind::Type, "sequence item: expected str instance, {} found (from a filter block)",
          result.type_name());
  emit(out, result.as_string());
}

void Interpreter::exec_with(const WithStmt& s, std::string& out) {
  std::vector<Value> values;
  for (const auto& [target, value] : s.assignments) values.push_back(eval(*value));
  ScopeRestorer restore(*this);
  scope_ = new_scope(scope_);
  declare(s.declared);
  for (size_t i = 0; i < values.size(); ++i) assign(*s.assignments[i].first, values[i]);
  exec(s.body, out);
}

}  // namespace tandem::jinja
