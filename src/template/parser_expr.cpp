// Expression grammar, precedence from low to high (as jinja2):
//   condexpr (a if c else b) < or < and < not < compare (== != < <= > >= in, not in)
//   < + - < ~ < * / // % < ** (left-assoc) < unary - + < primary, postfix (. [] ()),
//   filters (|) and tests (is).
#include "template/errors.h"
#include "template/filters.h"
#include "template/parser.h"
#include "template/predicates.h"

namespace tandem::jinja {
namespace {

bool is_compare_op(Tok t) {
  return t == Tok::Eq || t == Tok::Ne || t == Tok::Lt || t == Tok::LtEq || t == Tok::Gt ||
         t == Tok::GtEq;
}

CmpOp compare_op(Tok t) {
  switch (t) {
    case Tok::Eq:
      return CmpOp::Eq;
    case Tok::Ne:
      return CmpOp::Ne;
    case Tok::Lt:
      return CmpOp::Lt;
    case Tok::LtEq:
      return CmpOp::LtEq;
    case Tok::Gt:
      return CmpOp::Gt;
    default:
      return CmpOp::GtEq;
  }
}

}  // namespace

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = cur().line;
  size_t mark = unknown_.size();
  ExprPtr expr1 = parse_or();
  if (!cur().is_name("if")) return expr1;
  // The whole inline-if is soft: unknown filters in it fail only when evaluated.
  unknown_.resize(mark);
  SoftScope soft(*this, true);
  while (skip_name("if")) {
    auto node = make_node<CondExpr>(line);
    node->test = parse_or();
    if (skip_name("else")) node->expr2 = parse_condexpr();
    node->expr1 = std::move(expr1);
    expr1 = std::move(node);
    line = cur().line;
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  int line = cur().line;
  ExprPtr left = parse_and();
  while (skip_name("or")) {
    left = make_node<BinaryExpr>(ExprKind::Or, BinOp::Add, std::move(left), parse_and(), line);
    line = cur().line;
  }
  return left;
}

ExprPtr Parser::parse_and() {
  int line = cur().line;
  ExprPtr left = parse_not();
  while (skip_name("and")) {
    left = make_node<BinaryExpr>(ExprKind::And, BinOp::Add, std::move(left), parse_not(), line);
    line = cur().line;
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (cur().is_name("not")) {
    int line = advance().line;
    return make_node<UnaryExpr>(ExprKind::Not, parse_not(), line);
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = cur().line;
  ExprPtr expr = parse_math1();
  auto node = make_node<CompareExpr>(nullptr, line);
  while (true) {
    if (is_compare_op(cur().type)) {
      CmpOp op = compare_op(advance().type);
      node->ops.emplace_back(op, parse_math1());
    } else if (skip_name("in")) {
      node->ops.emplace_back(CmpOp::In, parse_math1());
    } else if (cur().is_name("not") && peek().is_name("in")) {
      pos_ += 2;
      node->ops.emplace_back(CmpOp::NotIn, parse_math1());
    } else {
      break;
    }
  }
  if (node->ops.empty()) return expr;
  node->first = std::move(expr);
  return node;
}

ExprPtr Parser::parse_math1() {
  int line = cur().line;
  ExprPtr left = parse_concat();
  while (cur().type == Tok::Add || cur().type == Tok::Sub) {
    BinOp op = advance().type == Tok::Add ? BinOp::Add : BinOp::Sub;
    left = make_node<BinaryExpr>(ExprKind::Binary, op, std::move(left), parse_concat(), line);
    line = cur().line;
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  int line = cur().line;
  ExprList items;
  items.push_back(parse_math2());
  while (skip_if(Tok::Tilde)) items.push_back(parse_math2());
  if (items.size() == 1) return std::move(items[0]);
  return make_node<ConcatExpr>(std::move(items), line);
}

ExprPtr Parser::parse_math2() {
  int line = cur().line;
  ExprPtr left = parse_pow();
  while (true) {
    BinOp op;
    switch (cur().type) {
      case Tok::Mul:
        op = BinOp::Mul;
        break;
      case Tok::Div:
        op = BinOp::Div;
        break;
      case Tok::FloorDiv:
        op = BinOp::FloorDiv;
        break;
      case Tok::Mod:
        op = BinOp::Mod;
        break;
      default:
        return left;
    }
    advance();
    left = make_node<BinaryExpr>(ExprKind::Binary, op, std::move(left), parse_pow(), line);
    line = cur().line;
  }
}

ExprPtr Parser::parse_pow() {
  int line = cur().line;
  ExprPtr left = parse_unary();
  while (skip_if(Tok::Pow)) {
    left = make_node<BinaryExpr>(ExprKind::Binary, BinOp::Pow, std::move(left), parse_unary(), line);
    line = cur().line;
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  NestingGuard guard(*this);
  int line = cur().line;
  ExprPtr node;
  if (skip_if(Tok::Sub)) {
    node = make_node<UnaryExpr>(ExprKind::Neg, parse_unary(false), line);
  } else if (skip_if(Tok::Add)) {
    node = make_node<UnaryExpr>(ExprKind::Pos, parse_unary(false), line);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

void Parser::note_name(const std::string& name) {
  if (macros_.empty()) return;
  MacroDef* m = macros_.back();
  if (name == "caller") m->uses_caller = true;
  if (name == "varargs") m->uses_varargs = true;
  if (name == "kwargs") m->uses_kwargs = true;
}

ExprPtr Parser::parse_primary(bool with_namespace) {
  const Token& tok = cur();
  int line = tok.line;
  switch (tok.type) {
    case Tok::Name: {
      std::string name = advance().text;
      if (name == "true" || name == "True") return make_node<ConstExpr>(Value::boolean(true), line);
      if (name == "false" || name == "False") return make_node<ConstExpr>(Value::boolean(false), line);
      if (name == "none" || name == "None") return make_node<ConstExpr>(Value::none(), line);
      if (with_namespace && cur().type == Tok::Dot) {
        advance();
        std::string attr = expect(Tok::Name).text;
        return make_node<NSRefExpr>(std::move(name), std::move(attr), line);
      }
      note_name(name);
      return make_node<NameExpr>(std::move(name), line);
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) s += advance().text;  // adjacent literals join
      return make_node<ConstExpr>(Value::string(std::move(s)), line);
    }
    case Tok::Int:
      return make_node<ConstExpr>(Value::integer(advance().int_value), line);
    case Tok::Float:
      return make_node<ConstExpr>(Value::number(advance().float_value), line);
    case Tok::LParen: {
      advance();
      ExprPtr node = parse_tuple(false, true, {}, true);
      expect(Tok::RParen);
      return node;
    }
    case Tok::LBracket:
      return parse_list();
    case Tok::LBrace:
      return parse_dict();
    default:
      fail(fmt::format("unexpected '{}'", describe(tok.type)), line);
  }
}

bool Parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  Tok t = cur().type;
  if (t == Tok::VarEnd || t == Tok::BlockEnd || t == Tok::RParen || t == Tok::Eof) return true;
  for (const std::string& name : extra_end)
    if (cur().is_name(name.c_str())) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            const std::vector<std::string>& extra_end, bool explicit_parens,
                            bool with_namespace) {
  int line = cur().line;
  ExprList args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect(Tok::Comma);
    if (is_tuple_end(extra_end)) break;
    args.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
    if (cur().type == Tok::Comma) {
      is_tuple = true;
    } else {
      break;
    }
    line = cur().line;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens)
      fail(fmt::format("Expected an expression, got '{}'", describe(cur().type)));
  }
  return make_node<SeqExpr>(ExprKind::Tuple, std::move(args), line);
}

ExprPtr Parser::parse_list() {
  int line = expect(Tok::LBracket).line;
  ExprList items;
  while (cur().type != Tok::RBracket) {
    if (!items.empty()) expect(Tok::Comma);
    if (cur().type == Tok::RBracket) break;
    items.push_back(parse_expression());
  }
  expect(Tok::RBracket);
  return make_node<SeqExpr>(ExprKind::List, std::move(items), line);
}

ExprPtr Parser::parse_dict() {
  auto node = make_node<DictExpr>(expect(Tok::LBrace).line);
  while (cur().type != Tok::RBrace) {
    if (!node->pairs.empty()) expect(Tok::Comma);
    if (cur().type == Tok::RBrace) break;
    ExprPtr key = parse_expression();
    expect(Tok::Colon);
    node->pairs.emplace_back(std::move(key), parse_expression());
  }
  expect(Tok::RBrace);
  return node;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    Tok t = cur().type;
    if (t == Tok::Dot || t == Tok::LBracket) {
      node = parse_subscript(std::move(node));
    } else if (t == Tok::LParen) {
      int line = cur().line;
      auto call = make_node<CallExpr>(std::move(node), line);
      call->args = parse_call_args();
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    Tok t = cur().type;
    if (t == Tok::Pipe) {
      node = parse_filter(std::move(node), false);
    } else if (cur().is_name("is")) {
      node = parse_test(std::move(node));
    } else if (t == Tok::LParen) {
      int line = cur().line;
      auto call = make_node<CallExpr>(std::move(node), line);
      call->args = parse_call_args();
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& tok = advance();
  int line = tok.line;
  if (tok.type == Tok::Dot) {
    const Token& attr = advance();
    if (attr.type == Tok::Name) return make_node<GetattrExpr>(std::move(node), attr.text, line);
    if (attr.type != Tok::Int) fail("expected name or number", attr.line);
    return make_node<GetitemExpr>(std::move(node), make_node<ConstExpr>(Value::integer(attr.int_value), line),
                             line);
  }
  ExprList args;
  while (cur().type != Tok::RBracket) {
    if (!args.empty()) expect(Tok::Comma);
    args.push_back(parse_subscribed());
  }
  expect(Tok::RBracket);
  ExprPtr index =
      args.size() == 1 ? std::move(args[0]) : make_node<SeqExpr>(ExprKind::Tuple, std::move(args), line);
  return make_node<GetitemExpr>(std::move(node), std::move(index), line);
}

ExprPtr Parser::parse_subscribed() {
  int line = cur().line;
  auto slice = make_node<SliceExpr>(line);
  if (cur().type == Tok::Colon) {
    advance();
  } else {
    ExprPtr node = parse_expression();
    if (cur().type != Tok::Colon) return node;
    advance();
    slice->start = std::move(node);
  }
  if (cur().type != Tok::Colon && cur().type != Tok::RBracket && cur().type != Tok::Comma)
    slice->stop = parse_expression();
  if (cur().type == Tok::Colon) {
    advance();
    if (cur().type != Tok::RBracket && cur().type != Tok::Comma) slice->step = parse_expression();
  }
  return slice;
}

CallArgsExpr Parser::parse_call_args() {
  int line = expect(Tok::LParen).line;
  CallArgsExpr out;
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression", line);
  };
  while (cur().type != Tok::RParen) {
    if (require_comma) {
      expect(Tok::Comma);
      if (cur().type == Tok::RParen) break;  // trailing comma
    }
    if (skip_if(Tok::Mul)) {
      ensure(!out.dyn_args && !out.dyn_kwargs);
      out.dyn_args = parse_expression();
    } else if (skip_if(Tok::Pow)) {
      ensure(!out.dyn_kwargs);
      out.dyn_kwargs = parse_expression();
    } else if (cur().type == Tok::Name && peek().type == Tok::Assign) {
      ensure(!out.dyn_kwargs);
      std::string key = advance().text;
      advance();
      out.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      ensure(!out.dyn_args && !out.dyn_kwargs && out.kwargs.empty());
      out.args.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect(Tok::RParen);
  return out;
}

std::string Parser::parse_dotted_name() {
  std::string name = expect(Tok::Name).text;
  while (skip_if(Tok::Dot)) name += "." + expect(Tok::Name).text;
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (cur().type == Tok::Pipe || start_inline) {
    if (!start_inline) advance();
    int line = cur().line;
    std::string name = parse_dotted_name();
    if (!soft_ && !find_filter(name))
      unknown_.emplace_back(fmt::format("No filter named '{}'.", name), line);
    auto f = make_node<FilterExpr>(ExprKind::Filter, std::move(node), std::move(name), line);
    if (cur().type == Tok::LParen) f->args = parse_call_args();
    node = std::move(f);
    start_inline = false;
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  int line = advance().line;  // "is"
  bool negated = skip_name("not");
  std::string name = parse_dotted_name();
  if (!soft_ && !find_test(name))
    unknown_.emplace_back(fmt::format("No test named '{}'.", name), line);
  auto t = make_node<FilterExpr>(ExprKind::Test, std::move(node), std::move(name), line);
  Tok type = cur().type;
  if (type == Tok::LParen) {
    t->args = parse_call_args();
  } else if ((type == Tok::Name || type == Tok::String || type == Tok::Int || type == Tok::Float ||
              type == Tok::LBracket || type == Tok::LBrace) &&
             !cur().is_name("else") && !cur().is_name("or") && !cur().is_name("and")) {
    if (cur().is_name("is")) fail("You cannot chain multiple tests with is");
    t->args.args.push_back(parse_postfix(parse_primary()));
  }
  if (negated) return make_node<UnaryExpr>(ExprKind::Not, std::move(t), line);
  return t;
}

}  // namespace tandem::jinja
