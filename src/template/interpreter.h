// One render of a parsed template. Owns the scopes and the values it creates; nothing here is
// shared with other renders, so concurrent renders of one Template need no locking.
//
// Scoping follows jinja2: the template root, every for-loop iteration, macro call, with-block,
// set-block and filter-block get a fresh scope; if-blocks do not. Name lookup walks the scope
// chain (a macro's chain is the one it was defined in), then the render's context variables,
// then the globals (range, namespace, raise_exception, ...). On entry a frame binds the names
// symbols.h marks undefined-at-entry, which reproduces jinja2's compiled-locals behaviour.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/jinja.h"
#include "template/value.h"

namespace tandem::jinja {

class RenderBudget;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  Value* find_local(std::string_view name);
  void set(std::string_view name, Value value);
};

class Interpreter {
 public:
  // `budget` bounds the render (installed on this thread by Template::render).
  Interpreter(const RenderOptions& options, const nlohmann::ordered_json& context,
              RenderBudget& budget);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const Program& program);

  Value eval(const Expr& e);  // eval_expr.cpp
  // Calls a callable value: macros, builtins, bound methods. Undefined callees raise.
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  // Sandboxed attribute / item access (attributes.cpp).
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);

  const RenderOptions& options() const { return options_; }

  // Every mutable object (namespace, loop, cycler, generator) made during a render goes
  // through track(): the render releases them all at its end, so reference cycles built by
  // a template (`{% set ns.me = ns %}`, macros stored in the scope they close over) cannot
  // leak. Scopes are tracked by new_scope() for the same reason.
  Value track(Value v);

 private:
  enum class Flow { Normal, Break, Continue };

  // One level of macro call or recursive loop: bounded by RenderLimits::max_depth, and each
  // counts as one step of the budget.
  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter& in);
    ~DepthGuard();

   private:
    int& depth_;
  };

  // Appends to an output buffer under the output and memory bounds.
  void emit(std::string& out, std::string_view text);

  // Restores the current scope when it goes out of scope (also on exceptions), so a frame
  // can freely switch scope_ to fresh child scopes.
  struct ScopeRestorer {
    Interpreter& in;
    std::shared_ptr<Scope> saved;
    explicit ScopeRestorer(Interpreter& i) : in(i), saved(i.scope_) {}
    ~ScopeRestorer() { in.scope_ = std::move(saved); }
  };

  // statements (interpreter.cpp)
  Flow exec(const StmtList& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_if(const IfStmt& s, std::string& out);
  Flow exec_for(const ForStmt& s, std::string& out);
  Flow run_loop(const ForStmt& s, const Value& iterable, std::shared_ptr<Scope> outer, int depth,
                std::string& out);
  void exec_set_block(const SetBlockStmt& s);
  void exec_call_block(const CallBlockStmt& s, std::string& out);
  void exec_filter_block(const FilterBlockStmt& s, std::string& out);
  void exec_with(const WithStmt& s, std::string& out);
  std::string render_in_scope(const StmtList& body, const Declared& declared);
  // Binds a frame's undefined-at-entry names (symbols.h) in the current scope.
  void declare(const Declared& names);
  void assign(const Expr& target, const Value& value);
  Value make_macro(const MacroDef& def);
  Value call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure, CallArgs& args);
  void bind_macro_args(const MacroDef& def, CallArgs& args);

  // expressions (eval_expr.cpp)
  Value lookup(const std::string& name);
  Value eval_literal(const Expr& e);
  Value eval_logic(const Expr& e);
  Value eval_test(const FilterExpr& e);
  Value eval_call(const CallExpr& e);
  CallArgs eval_args(const CallArgsExpr& a);
  Value eval_filter(const FilterExpr& e, const Value* block_input);
  Value eval_compare(const CompareExpr& e);
  Value eval_getitem(const GetitemExpr& e);

  std::shared_ptr<Scope> new_scope(std::shared_ptr<Scope> parent);

  friend class LoopObject;
  const RenderOptions& options_;
  RenderBudget& budget_;
  std::vector<std::shared_ptr<Scope>> scopes_;  // scopes of this render still in use (track())
  std::vector<Value> tracked_;
  size_t scopes_collect_at_ = 1024, tracked_collect_at_ = 1024;
  std::shared_ptr<Scope> context_;  // the render's variables: parent of the root scope
  std::shared_ptr<Scope> scope_;    // the current innermost scope
  int call_depth_ = 0;
};

// Unpacks `value` into exactly n items (tuple assignment), raising ValueError like Python.
ValueList unpack(const Value& value, size_t n);

}  // namespace tandem::jinja
