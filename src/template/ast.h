// The parsed template: jinja2's node types, reduced to what the sandboxed chat-template
// environment can express. Built once by the parser, then only read (shared by renders
// on many threads).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace tandem::jinja {

// ---------------------------------------------------------------- expressions

enum class ExprKind : uint8_t {
  Const,
  Name,
  NSRef,
  Tuple,
  List,
  Dict,
  Getattr,
  Getitem,
  Slice,
  Call,
  Filter,
  Test,
  Neg,
  Pos,
  Not,
  Binary,
  And,
  Or,
  Concat,
  Compare,
  CondExpr,
};

enum class BinOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp : uint8_t { Eq, Ne, Lt, LtEq, Gt, GtEq, In, NotIn };

struct Expr {
  ExprKind kind;
  int line;
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
};
using ExprPtr = std::unique_ptr<Expr>;
using ExprList = std::vector<ExprPtr>;

struct ConstExpr : Expr {
  Value value;
  ConstExpr(Value v, int l) : Expr(ExprKind::Const, l), value(std::move(v)) {}
};

struct NameExpr : Expr {
  std::string name;
  NameExpr(std::string n, int l) : Expr(ExprKind::Name, l), name(std::move(n)) {}
};

// `ns.attr` as an assignment target.
struct NSRefExpr : Expr {
  std::string name, attr;
  NSRefExpr(std::string n, std::string a, int l)
      : Expr(ExprKind::NSRef, l), name(std::move(n)), attr(std::move(a)) {}
};

// Tuple and List literals.
struct SeqExpr : Expr {
  ExprList items;
  SeqExpr(ExprKind k, ExprList i, int l) : Expr(k, l), items(std::move(i)) {}
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> pairs;
  explicit DictExpr(int l) : Expr(ExprKind::Dict, l) {}
};

struct GetattrExpr : Expr {
  ExprPtr obj;
  std::string attr;
  GetattrExpr(ExprPtr o, std::string a, int l)
      : Expr(ExprKind::Getattr, l), obj(std::move(o)), attr(std::move(a)) {}
};

struct GetitemExpr : Expr {
  ExprPtr obj, index;  // index may be a SliceExpr
  GetitemExpr(ExprPtr o, ExprPtr i, int l)
      : Expr(ExprKind::Getitem, l), obj(std::move(o)), index(std::move(i)) {}
};

struct SliceExpr : Expr {
  ExprPtr start, stop, step;  // each may be null
  explicit SliceExpr(int l) : Expr(ExprKind::Slice, l) {}
};

// Arguments of a call, filter or test: f(a, b, k=v, *args, **kwargs).
struct CallArgsExpr {
  ExprList args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args, dyn_kwargs;
};

struct CallExpr : Expr {
  ExprPtr callee;
  CallArgsExpr args;
  CallExpr(ExprPtr c, int l) : Expr(ExprKind::Call, l), callee(std::move(c)) {}
};

// `node | name(args)` (node is null inside {% filter %} blocks) and `node is name(args)`.
struct FilterExpr : Expr {
  ExprPtr node;
  std::string name;
  CallArgsExpr args;
  FilterExpr(ExprKind k, ExprPtr n, std::string nm, int l)
      : Expr(k, l), node(std::move(n)), name(std::move(nm)) {}
};

struct UnaryExpr : Expr {  // Neg, Pos, Not
  ExprPtr operand;
  UnaryExpr(ExprKind k, ExprPtr o, int l) : Expr(k, l), operand(std::move(o)) {}
};

struct BinaryExpr : Expr {  // Binary (with op), And, Or
  BinOp op = BinOp::Add;
  ExprPtr left, right;
  BinaryExpr(ExprKind k, BinOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(k, l), op(o), left(std::move(a)), right(std::move(b)) {}
};

struct ConcatExpr : Expr {
  ExprList items;
  ConcatExpr(ExprList i, int l) : Expr(ExprKind::Concat, l), items(std::move(i)) {}
};

struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> ops;
  CompareExpr(ExprPtr f, int l) : Expr(ExprKind::Compare, l), first(std::move(f)) {}
};

struct CondExpr : Expr {       // expr1 if test else expr2
  ExprPtr test, expr1, expr2;  // expr2 may be null
  explicit CondExpr(int l) : Expr(ExprKind::CondExpr, l) {}
};

// ---------------------------------------------------------------- statements

enum class StmtKind : uint8_t {
  Text,
  Print,
  If,
  For,
  Set,
  SetBlock,
  Macro,
  CallBlock,
  FilterBlock,
  With,
  Break,
  Continue,
  Autoescape,
  Fail,
};

struct Stmt {
  StmtKind kind;
  int line;
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  std::string text;
  TextStmt(std::string t, int l) : Stmt(StmtKind::Text, l), text(std::move(t)) {}
};

struct PrintStmt : Stmt {
  ExprPtr expr;
  PrintStmt(ExprPtr e, int l) : Stmt(StmtKind::Print, l), expr(std::move(e)) {}
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, StmtList>> branches;  // if + elifs, in order
  StmtList else_body;
  explicit IfStmt(int l) : Stmt(StmtKind::If, l) {}
};

// Names a frame binds as undefined on entry (see symbols.h): set by analyze_symbols.
using Declared = std::vector<std::string>;

struct ForStmt : Stmt {
  ExprPtr target, iter, filter;  // filter: `for x in y if cond`, may be null
  bool recursive = false;
  StmtList body, else_body;
  Declared body_declared, else_declared;
  explicit ForStmt(int l) : Stmt(StmtKind::For, l) {}
};

struct SetStmt : Stmt {
  ExprPtr target, value;
  explicit SetStmt(int l) : Stmt(StmtKind::Set, l) {}
};

struct SetBlockStmt : Stmt {
  ExprPtr target;
  ExprPtr filter;  // FilterExpr chain with a null innermost node, or null
  StmtList body;
  Declared declared;
  explicit SetBlockStmt(int l) : Stmt(StmtKind::SetBlock, l) {}
};

// A macro, and the anonymous `caller` macro of a call block.
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  ExprList defaults;  // for the last defaults.size() params
  StmtList body;
  Declared declared;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

struct MacroStmt : Stmt {
  MacroDef def;
  explicit MacroStmt(int l) : Stmt(StmtKind::Macro, l) {}
};

struct CallBlockStmt : Stmt {
  ExprPtr call;  // a CallExpr; null for {% generation %}, which just renders its body
  MacroDef caller;
  explicit CallBlockStmt(int l) : Stmt(StmtKind::CallBlock, l) {}
};

struct FilterBlockStmt : Stmt {
  ExprPtr filter;  // FilterExpr chain with a null innermost node
  StmtList body;
  Declared declared;
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::FilterBlock, l) {}
};

struct WithStmt : Stmt {
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;  // target = value
  StmtList body;
  Declared declared;
  explicit WithStmt(int l) : Stmt(StmtKind::With, l) {}
};

// {% autoescape expr %}: only a false expr is supported (chat templates do not escape).
struct AutoescapeStmt : Stmt {
  ExprPtr enabled;
  StmtList body;
  Declared declared;
  explicit AutoescapeStmt(int l) : Stmt(StmtKind::Autoescape, l) {}
};

// A tag that parses but cannot run here ({% include %}, {% extends %}, {% import %} need a
// template loader, which a chat template never has): fails when executed, like jinja2.
struct FailStmt : Stmt {
  std::string message;
  FailStmt(std::string m, int l) : Stmt(StmtKind::Fail, l), message(std::move(m)) {}
};

struct Program {
  StmtList body;
  Declared declared;
};

}  // namespace tandem::jinja
