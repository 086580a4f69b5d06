// Tokens -> AST, following jinja2's parser (precedence, tuples, tests without parentheses,
// `for ... if`, namespace targets) plus the two extensions transformers enables:
// loopcontrols (break/continue) and {% generation %}.
// Like jinja2's compiler, an unknown filter or test is an error at parse time unless it sits
// inside an if-statement or inline if-expression, where it only fails when evaluated.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace tandem::jinja {

// An AST node (the parser's two files build them the same way).
template <typename T, typename... Args>
std::unique_ptr<T> make_node(Args&&... args) {
  return std::make_unique<T>(std::forward<Args>(args)...);
}

std::unique_ptr<Program> parse_program(const std::string& source);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  std::unique_ptr<Program> parse();

 private:
  friend struct SoftScope;
  friend struct NestingGuard;
  // token stream
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const;
  const Token& advance() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool skip_if(Tok type);
  bool skip_name(const char* name);
  const Token& expect(Tok type);
  void expect_name(const char* name);
  [[noreturn]] void fail(const std::string& msg, int line = 0) const;

  // statements (parser_stmt.cpp)
  StmtList subparse(const std::vector<std::string>& end_tokens);
  StmtList parse_body(const std::vector<std::string>& end_tokens, bool drop_needle);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  StmtPtr parse_for();
  StmtPtr parse_set();
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  StmtPtr parse_generation();
  StmtPtr parse_loop_control(StmtKind kind);
  StmtPtr parse_block();
  StmtPtr parse_autoescape();
  StmtPtr parse_loader_tag(const std::string& tag);
  void parse_signature(MacroDef& def);
  void parse_macro_body(MacroDef& def, const char* end_tag);
  ExprPtr parse_assign_target(bool with_tuple, bool name_only,
                              const std::vector<std::string>& extra_end, bool with_namespace);

  // expressions (parser_expr.cpp)
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary(bool with_namespace = false);
  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                      const std::vector<std::string>& extra_end, bool explicit_parens,
                      bool with_namespace = false);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  CallArgsExpr parse_call_args();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  bool is_tuple_end(const std::vector<std::string>& extra_end) const;
  std::string parse_dotted_name();
  void note_name(const std::string& name);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  bool soft_ = false;              // inside an if / inline-if: unknown filters fail late
  int loop_depth_ = 0;             // for break/continue
  std::vector<MacroDef*> macros_;  // macros being parsed (innermost last)
  std::vector<std::string> tag_stack_;
  int nesting_ = 0;  // expression/statement nesting, bounded (NestingGuard)
  // Unknown filters/tests outside soft frames: (message, line); the first one fails the
  // parse once the whole template has parsed, as jinja2's compiler does.
  std::vector<std::pair<std::string, int>> unknown_;
};

// Bounds how deeply expressions and statements nest, so a hostile template cannot exhaust the
// stack of the recursive-descent parser (or of the interpreter walking the tree later).
struct NestingGuard {
  static constexpr int kMaxNesting = 200;
  Parser& p;
  explicit NestingGuard(Parser& parser);
  ~NestingGuard() { --p.nesting_; }
};

// Sets the parser's soft flag for a lexical extent (if-statements, inline ifs: soft;
// loop, macro and block bodies: hard), restoring it on exit.
struct SoftScope {
  Parser& p;
  bool saved;
  SoftScope(Parser& parser, bool soft) : p(parser), saved(parser.soft_) { p.soft_ = soft; }
  ~SoftScope() { p.soft_ = saved; }
};

}  // namespace tandem::jinja
