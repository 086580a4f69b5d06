// Walks each frame in jinja2's FrameSymbolVisitor order: expressions load names, assignment
// targets / macro names store them (an assignment's value is visited before its target),
// if-branches are analyzed as branches (a name first seen there is never undefined-at-entry),
// and child frames are analyzed afterwards, knowing every name their ancestors reference.
#include "template/symbols.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "template/ast_walk.h"

namespace tandem::jinja {
namespace {

using Names = std::set<std::string>;

class FrameAnalyzer {
 public:
  FrameAnalyzer(const Names& ancestors, Declared& declared)
      : ancestors_(ancestors), declared_(declared) {}

  void param(const std::string& name) { seen_.insert(name); }
  void body(StmtList& body) {
    for (auto& s : body) stmt(*s);
  }
  void expr(const Expr* e);
  void store_target(const Expr& target);
  void param_target(const Expr& target) {  // loop targets, with-block targets
    if (target.kind == ExprKind::Name) param(static_cast<const NameExpr&>(target).name);
    if (target.kind == ExprKind::Tuple)
      for (const auto& item : static_cast<const SeqExpr&>(target).items) param_target(*item);
  }

  // Analyzes the child frames found in this frame, now that its references are complete.
  void finish() {
    Names refs = ancestors_;
    refs.insert(seen_.begin(), seen_.end());
    for (auto& child : children_) child(refs);
  }

 private:
  void load(const std::string& name) { seen_.insert(name); }
  void store(const std::string& name) {
    if (!seen_.insert(name).second) return;
    if (branch_depth_ == 0 && !ancestors_.count(name)) declared_.push_back(name);
  }
  void stmt(Stmt& s);
  void if_stmt(IfStmt& node);
  void child_frame_stmt(Stmt& s);
  void macro_frame(MacroDef& def);

  const Names& ancestors_;
  Declared& declared_;
  Names seen_;
  int branch_depth_ = 0;
  std::vector<std::function<void(const Names&)>> children_;
};

// A frame: optional parameters, then the body; its children after it.
void analyze_frame(const Names& ancestors, Declared& declared, StmtList& body,
                   const std::function<void(FrameAnalyzer&)>& prologue = nullptr) {
  declared.clear();
  FrameAnalyzer a(ancestors, declared);
  if (prologue) prologue(a);
  a.body(body);
  a.finish();
}

void FrameAnalyzer::expr(const Expr* e) {
  if (!e) return;
  if (e->kind == ExprKind::Name) return load(static_cast<const NameExpr*>(e)->name);
  if (e->kind == ExprKind::NSRef) return load(static_cast<const NSRefExpr*>(e)->name);
  for_each_child(*e, [this](const Expr& child) { expr(&child); });
}

void FrameAnalyzer::store_target(const Expr& target) {
  if (target.kind == ExprKind::Name) {
    store(static_cast<const NameExpr&>(target).name);
  } else if (target.kind == ExprKind::NSRef) {
    load(static_cast<const NSRefExpr&>(target).name);
  } else if (target.kind == ExprKind::Tuple) {
    for (const auto& item : static_cast<const SeqExpr&>(target).items) store_target(*item);
  }
}

void FrameAnalyzer::macro_frame(MacroDef& def) {
  children_.push_back([&def](const Names& refs) {
    analyze_frame(refs, def.declared, def.body, [&def](FrameAnalyzer& a) {
      for (const auto& p : def.params) a.param(p);
      for (const char* special : {"caller", "varargs", "kwargs"}) a.param(special);
      for (const auto& d : def.defaults) a.expr(d.get());
    });
  });
}

void FrameAnalyzer::if_stmt(IfStmt& node) {
  expr(node.branches.front().first.get());
  ++branch_depth_;
  for (size_t i = 0; i < node.branches.size(); ++i) {
    if (i) expr(node.branches[i].first.get());
    body(node.branches[i].second);
  }
  body(node.else_body);
  --branch_depth_;
}

void FrameAnalyzer::stmt(Stmt& s) {
  switch (s.kind) {
    case StmtKind::Print:
      expr(static_cast<PrintStmt&>(s).expr.get());
      return;
    case StmtKind::If:
      if_stmt(static_cast<IfStmt&>(s));
      return;
    case StmtKind::Set: {
      auto& node = static_cast<SetStmt&>(s);
      expr(node.value.get());
      store_target(*node.target);
      return;
    }
    case StmtKind::Macro: {
      auto& def = static_cast<MacroStmt&>(s).def;
      store(def.name);
      macro_frame(def);
      return;
    }
    case StmtKind::CallBlock: {
      auto& node = static_cast<CallBlockStmt&>(s);
      expr(node.call.get());
      macro_frame(node.caller);
      return;
    }
    default:
      child_frame_stmt(s);
  }
}

// Statements with a body of their own: what they reference here, then their frame later.
void FrameAnalyzer::child_frame_stmt(Stmt& s) {
  switch (s.kind) {
    case StmtKind::For: {
      auto& node = static_cast<ForStmt&>(s);
      expr(node.iter.get());
      children_.push_back([&node](const Names& refs) {
        analyze_frame(refs, node.body_declared, node.body, [&node](FrameAnalyzer& a) {
          a.param("loop");
          a.param_target(*node.target);
        });
        analyze_frame(refs, node.else_declared, node.else_body);
      });
      return;
    }
    case StmtKind::SetBlock: {
      auto& node = static_cast<SetBlockStmt&>(s);
      store_target(*node.target);
      children_.push_back(
          [&node](const Names& refs) { analyze_frame(refs, node.declared, node.body); });
      return;
    }
    case StmtKind::FilterBlock: {
      auto& node = static_cast<FilterBlockStmt&>(s);
      expr(node.filter.get());
      children_.push_back(
          [&node](const Names& refs) { analyze_frame(refs, node.declared, node.body); });
      return;
    }
    case StmtKind::With: {
      auto& node = static_cast<WithStmt&>(s);
      for (auto& [target, value] : node.assignments) expr(value.get());
      children_.push_back([&node](const Names& refs) {
        analyze_frame(refs, node.declared, node.body, [&node](FrameAnalyzer& a) {
          for (auto& [target, value] : node.assignments) a.param_target(*target);
        });
      });
      return;
    }
    case StmtKind::Autoescape: {
      auto& node = static_cast<AutoescapeStmt&>(s);
      children_.push_back([&node](const Names& refs) {
        analyze_frame(refs, node.declared, node.body,
                      [&node](FrameAnalyzer& a) { a.expr(node.enabled.get()); });
      });
      return;
    }
    default:
      return;  // text, break, continue, fail
  }
}

}  // namespace

void analyze_symbols(Program& program) {
  Names none;
  analyze_frame(none, program.declared, program.body);
}

}  // namespace tandem::jinja
