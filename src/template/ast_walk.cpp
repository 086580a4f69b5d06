#include "template/ast_walk.h"

namespace tandem::jinja {
namespace {

void visit(const ExprPtr& e, const std::function<void(const Expr&)>& fn) {
  if (e) fn(*e);
}

void visit_args(const CallArgsExpr& a, const std::function<void(const Expr&)>& fn) {
  for (const auto& arg : a.args) visit(arg, fn);
  for (const auto& [k, v] : a.kwargs) visit(v, fn);
  visit(a.dyn_args, fn);
  visit(a.dyn_kwargs, fn);
}

}  // namespace

void for_each_child(const Expr& e, const std::function<void(const Expr&)>& fn) {
  switch (e.kind) {
    case ExprKind::Const:
    case ExprKind::Name:
    case ExprKind::NSRef:
      return;
    case ExprKind::Tuple:
    case ExprKind::List:
      for (const auto& item : static_cast<const SeqExpr&>(e).items) visit(item, fn);
      return;
    case ExprKind::Dict:
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).pairs) {
        visit(k, fn);
        visit(v, fn);
      }
      return;
    case ExprKind::Getattr:
      visit(static_cast<const GetattrExpr&>(e).obj, fn);
      return;
    case ExprKind::Getitem:
      visit(static_cast<const GetitemExpr&>(e).obj, fn);
      visit(static_cast<const GetitemExpr&>(e).index, fn);
      return;
    case ExprKind::Slice: {
      const auto& s = static_cast<const SliceExpr&>(e);
      visit(s.start, fn);
      visit(s.stop, fn);
      visit(s.step, fn);
      return;
    }
    case ExprKind::Call:
      visit(static_cast<const CallExpr&>(e).callee, fn);
      visit_args(static_cast<const CallExpr&>(e).args, fn);
      return;
    case ExprKind::Filter:
    case ExprKind::Test:
      visit(static_cast<const FilterExpr&>(e).node, fn);
      visit_args(static_cast<const FilterExpr&>(e).args, fn);
      return;
    case ExprKind::Neg:
    case ExprKind::Pos:
    case ExprKind::Not:
      visit(static_cast<const UnaryExpr&>(e).operand, fn);
      return;
    case ExprKind::Binary:
    case ExprKind::And:
    case ExprKind::Or:
      visit(static_cast<const BinaryExpr&>(e).left, fn);
      visit(static_cast<const BinaryExpr&>(e).right, fn);
      return;
    case ExprKind::Concat:
      for (const auto& item : static_cast<const ConcatExpr&>(e).items) visit(item, fn);
      return;
    case ExprKind::Compare:
      visit(static_cast<const CompareExpr&>(e).first, fn);
      for (const auto& [op, operand] : static_cast<const CompareExpr&>(e).ops) visit(operand, fn);
      return;
    case ExprKind::CondExpr: {
      const auto& c = static_cast<const CondExpr&>(e);
      visit(c.test, fn);
      visit(c.expr1, fn);
      visit(c.expr2, fn);
      return;
    }
  }
}

}  // namespace tandem::jinja
