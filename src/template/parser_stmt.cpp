// Statement grammar: template data, {{ print }}, and the {% tags %} the sandboxed chat-template
// environment knows (if, for, set, macro, call, filter, with, break, continue, generation).
#include "template/parser.h"

#include "template/errors.h"
#include "template/symbols.h"

namespace tandem::jinja {
namespace {

std::string join_quoted(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? " or '" : "'") + names[i] + "'";
  return out;
}

}  // namespace

NestingGuard::NestingGuard(Parser& parser) : p(parser) {
  if (++p.nesting_ > kMaxNesting) p.fail("the template nests too deeply");
}

std::unique_ptr<Program> parse_program(const std::string& source) {
  std::unique_ptr<Program> program = Parser(tokenize(source)).parse();
  analyze_symbols(*program);
  return program;
}

std::unique_ptr<Program> Parser::parse() {
  auto program = std::make_unique<Program>();
  program->body = subparse({});
  if (cur().type != Tok::Eof) fail(fmt::format("unexpected '{}'", describe(cur().type)));
  if (!unknown_.empty()) {
    RenderError e(ErrorKind::Assertion, unknown_.front().first);
    e.set_line(unknown_.front().second);
    throw e;
  }
  return program;
}

const Token& Parser::peek(size_t n) const {
  return toks_[std::min(pos_ + n, toks_.size() - 1)];
}

bool Parser::skip_if(Tok type) {
  if (cur().type != type) return false;
  advance();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!cur().is_name(name)) return false;
  advance();
  return true;
}

const Token& Parser::expect(Tok type) {
  if (cur().type != type) {
    if (cur().type == Tok::Eof)
      fail(fmt::format("unexpected end of template, expected '{}'.", describe(type)));
    fail(fmt::format("expected token '{}', got '{}'", describe(type),
                     cur().type == Tok::Name ? cur().text : describe(cur().type)));
  }
  return advance();
}

void Parser::expect_name(const char* name) {
  if (!cur().is_name(name))
    fail(fmt::format("expected token '{}', got '{}'", name,
                     cur().type == Tok::Name ? cur().text : describe(cur().type)));
  advance();
}

void Parser::fail(const std::string& msg, int line) const {
  RenderError e(ErrorKind::Syntax, msg);
  e.set_line(line ? line : cur().line);
  throw e;
}

StmtList Parser::subparse(const std::vector<std::string>& end_tokens) {
  StmtList body;
  while (cur().type != Tok::Eof) {
    const Token& tok = cur();
    if (tok.type == Tok::Data) {
      body.push_back(make_node<TextStmt>(tok.text, tok.line));
      advance();
    } else if (tok.type == Tok::VarBegin) {
      int line = advance().line;
      body.push_back(make_node<PrintStmt>(parse_tuple(false, true, {}, false), line));
      expect(Tok::VarEnd);
    } else if (tok.type == Tok::BlockBegin) {
      advance();
      for (const std::string& end : end_tokens)
        if (cur().is_name(end.c_str())) return body;
      body.push_back(parse_statement());
      expect(Tok::BlockEnd);
    } else {
      fail(fmt::format("unexpected '{}'", describe(tok.type)));
    }
  }
  return body;
}

StmtList Parser::parse_body(const std::vector<std::string>& end_tokens, bool drop_needle) {
  skip_if(Tok::Colon);
  expect(Tok::BlockEnd);
  StmtList body = subparse(end_tokens);
  if (cur().type == Tok::Eof) {
    std::string msg = "Unexpected end of template. Jinja was looking for the following tags: " +
                      join_quoted(end_tokens) + ".";
    if (!tag_stack_.empty())
      msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(msg);
  }
  if (drop_needle) advance();
  return body;
}

StmtPtr Parser::parse_statement() {
  NestingGuard guard(*this);
  const Token& tok = cur();
  if (tok.type != Tok::Name) fail("tag name expected", tok.line);
  std::string name = tok.text;
  tag_stack_.push_back(name);
  StmtPtr stmt;
  if (name == "if")
    stmt = parse_if();
  else if (name == "for")
    stmt = parse_for();
  else if (name == "set")
    stmt = parse_set();
  else if (name == "macro")
    stmt = parse_macro();
  else if (name == "call")
    stmt = parse_call_block();
  else if (name == "filter")
    stmt = parse_filter_block();
  else if (name == "with")
    stmt = parse_with();
  else if (name == "generation")
    stmt = parse_generation();
  else if (name == "break")
    stmt = parse_loop_control(StmtKind::Break);
  else if (name == "continue")
    stmt = parse_loop_control(StmtKind::Continue);
  else if (name == "block")
    stmt = parse_block();
  else if (name == "autoescape")
    stmt = parse_autoescape();
  else if (name == "extends" || name == "include" || name == "import" || name == "from")
    stmt = parse_loader_tag(name);
  else if (name == "print") {
    int line = advance().line;
    ExprList items;
    while (cur().type != Tok::BlockEnd) {
      if (!items.empty()) expect(Tok::Comma);
      items.push_back(parse_expression());
    }
    // Each expression prints in turn: the same as printing their str() concatenation.
    ExprPtr e = items.size() == 1 ? std::move(items[0]) : make_node<ConcatExpr>(std::move(items), line);
    stmt = make_node<PrintStmt>(std::move(e), line);
  } else {
    tag_stack_.pop_back();
    fail(fmt::format("Encountered unknown tag '{}'.", name), tok.line);
  }
  tag_stack_.pop_back();
  return stmt;
}

StmtPtr Parser::parse_if() {
  auto node = make_node<IfStmt>(advance().line);
  SoftScope soft(*this, true);
  while (true) {
    ExprPtr test = parse_tuple(false, false, {}, false);
    StmtList body = parse_body({"elif", "else", "endif"}, false);
    node->branches.emplace_back(std::move(test), std::move(body));
    const Token& tok = advance();
    if (tok.is_name("elif")) continue;
    if (tok.is_name("else")) node->else_body = parse_body({"endif"}, true);
    break;
  }
  return node;
}

StmtPtr Parser::parse_for() {
  auto node = make_node<ForStmt>(advance().line);
  node->target = parse_assign_target(true, false, {"in"}, false);
  std::function<bool(const Expr&)> binds_loop = [&](const Expr& e) {
    if (e.kind == ExprKind::Name) return static_cast<const NameExpr&>(e).name == "loop";
    if (e.kind != ExprKind::Tuple) return false;
    for (const auto& item : static_cast<const SeqExpr&>(e).items)
      if (binds_loop(*item)) return true;
    return false;
  };
  if (binds_loop(*node->target)) {
    RenderError e(ErrorKind::Assertion, "Can't assign to special loop variable in for-loop target");
    e.set_line(node->line);
    throw e;
  }
  expect_name("in");
  node->iter = parse_tuple(false, false, {"recursive"}, false);
  SoftScope hard(*this, false);
  if (skip_name("if")) node->filter = parse_expression();
  node->recursive = skip_name("recursive");
  ++loop_depth_;
  node->body = parse_body({"endfor", "else"}, false);
  --loop_depth_;
  if (advance().is_name("else")) node->else_body = parse_body({"endfor"}, true);
  return node;
}

StmtPtr Parser::parse_set() {
  int line = advance().line;
  ExprPtr target = parse_assign_target(true, false, {}, true);
  if (skip_if(Tok::Assign)) {
    auto node = make_node<SetStmt>(line);
    node->target = std::move(target);
    node->value = parse_tuple(false, true, {}, false);
    return node;
  }
  auto node = make_node<SetBlockStmt>(line);
  node->target = std::move(target);
  SoftScope hard(*this, false);
  if (cur().type == Tok::Pipe) node->filter = parse_filter(nullptr, false);
  node->body = parse_body({"endset"}, true);
  return node;
}

void Parser::parse_signature(MacroDef& def) {
  expect(Tok::LParen);
  while (cur().type != Tok::RParen) {
    if (!def.params.empty()) expect(Tok::Comma);
    def.params.push_back(expect(Tok::Name).text);
    if (skip_if(Tok::Assign)) {
      def.defaults.push_back(parse_expression());
    } else if (!def.defaults.empty()) {
      fail("non-default argument follows default argument");
    }
  }
  expect(Tok::RParen);
}

void Parser::parse_macro_body(MacroDef& def, const char* end_tag) {
  SoftScope hard(*this, false);
  int saved_loops = loop_depth_;
  loop_depth_ = 0;
  macros_.push_back(&def);
  def.body = parse_body({end_tag}, true);
  macros_.pop_back();
  loop_depth_ = saved_loops;
}

StmtPtr Parser::parse_macro() {
  auto node = make_node<MacroStmt>(advance().line);
  node->def.name = expect(Tok::Name).text;
  parse_signature(node->def);
  parse_macro_body(node->def, "endmacro");
  return node;
}

StmtPtr Parser::parse_call_block() {
  auto node = make_node<CallBlockStmt>(advance().line);
  if (cur().type == Tok::LParen) parse_signature(node->caller);
  node->caller.name = "caller";
  {
    SoftScope hard(*this, false);
    node->call = parse_expression();
  }
  if (node->call->kind != ExprKind::Call) fail("expected call", node->line);
  parse_macro_body(node->caller, "endcall");
  return node;
}

StmtPtr Parser::parse_generation() {
  auto node = make_node<CallBlockStmt>(advance().line);
  node->caller.name = "caller";
  parse_macro_body(node->caller, "endgeneration");
  return node;
}

StmtPtr Parser::parse_filter_block() {
  auto node = make_node<FilterBlockStmt>(advance().line);
  SoftScope hard(*this, false);
  node->filter = parse_filter(nullptr, true);
  node->body = parse_body({"endfilter"}, true);
  return node;
}

StmtPtr Parser::parse_with() {
  auto node = make_node<WithStmt>(advance().line);
  SoftScope hard(*this, false);
  while (cur().type != Tok::BlockEnd) {
    if (!node->assignments.empty()) expect(Tok::Comma);
    ExprPtr target = parse_assign_target(true, false, {}, false);
    expect(Tok::Assign);
    node->assignments.emplace_back(std::move(target), parse_expression());
  }
  node->body = parse_body({"endwith"}, true);
  return node;
}

StmtPtr Parser::parse_loop_control(StmtKind kind) {
  int line = advance().line;
  if (loop_depth_ == 0)
    fail(kind == StmtKind::Break ? "'break' outside loop" : "'continue' not properly in loop",
         line);
  return make_node<Stmt>(kind, line);
}

StmtPtr Parser::parse_block() {
  auto node = make_node<WithStmt>(advance().line);  // a block renders in place, in its own scope
  std::string name = expect(Tok::Name).text;
  skip_name("scoped");
  skip_name("required");
  if (cur().type == Tok::Sub)
    fail(
        "Block names in Jinja have to be valid Python identifiers and may not contain hyphens, "
        "use an underscore instead.");
  SoftScope hard(*this, false);
  node->body = parse_body({"endblock"}, true);
  skip_name(name.c_str());
  return node;
}

StmtPtr Parser::parse_autoescape() {
  auto node = make_node<AutoescapeStmt>(advance().line);
  node->enabled = parse_expression();
  node->body = parse_body({"endautoescape"}, true);
  return node;
}

// extends / include / import / from: parsed like jinja2, failing when run (no loader).
StmtPtr Parser::parse_loader_tag(const std::string& tag) {
  int line = advance().line;
  parse_expression();
  if (tag == "include" && cur().is_name("ignore") && peek().is_name("missing")) pos_ += 2;
  if (tag == "import") {
    expect_name("as");
    expect(Tok::Name);
  }
  if (tag == "from") {
    expect_name("import");
    while (cur().type != Tok::BlockEnd) advance();
  }
  if ((cur().is_name("with") || cur().is_name("without")) && peek().is_name("context")) pos_ += 2;
  return make_node<FailStmt>("no loader for this environment specified", line);
}

ExprPtr Parser::parse_assign_target(bool with_tuple, bool name_only,
                                    const std::vector<std::string>& extra_end,
                                    bool with_namespace) {
  ExprPtr target;
  if (name_only) {
    const Token& tok = expect(Tok::Name);
    target = make_node<NameExpr>(tok.text, tok.line);
  } else if (with_tuple) {
    target = parse_tuple(true, true, extra_end, false, with_namespace);
  } else {
    target = parse_primary(with_namespace);
  }
  // can_assign: names, namespace refs and (nested) tuples of them
  std::function<bool(const Expr&)> assignable = [&](const Expr& e) {
    if (e.kind == ExprKind::Name) {
      auto& n = static_cast<const NameExpr&>(e).name;
      return n != "true" && n != "false" && n != "none" && n != "True" && n != "False" &&
             n != "None";
    }
    if (e.kind == ExprKind::NSRef) return true;
    if (e.kind != ExprKind::Tuple) return false;
    for (const auto& item : static_cast<const SeqExpr&>(e).items)
      if (!assignable(*item)) return false;
    return true;
  };
  if (!assignable(*target)) {
    const char* what = target->kind == ExprKind::Const ? "const" : "expression";
    fail(fmt::format("can't assign to '{}'", what), target->line);
  }
  return target;
}

}  // namespace tandem::jinja
