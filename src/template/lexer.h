// Template source -> tokens, with jinja2's whitespace rules for
// Environment(trim_blocks=True, lstrip_blocks=True):
//   - newlines are normalized to "\n" and one trailing newline is dropped;
//   - `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/`-#}` after it;
//   - trim_blocks: a block or comment tag's single following "\n" is dropped (not after
//     `+%}`, not after `}}`);
//   - lstrip_blocks: spaces/tabs between a line start and a `{%`/`{#` are dropped
//     (not before `{{`, not with `{%+`);
//   - `{% raw %}...{% endraw %}` is data.
// Comments never reach the parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::jinja {

enum class Tok : uint8_t {
  Data,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Int,
  Float,
  // operators
  Add,
  Sub,
  Div,
  FloorDiv,
  Mul,
  Mod,
  Pow,
  Tilde,
  LBracket,
  RBracket,
  LParen,
  RParen,
  LBrace,
  RBrace,
  Eq,
  Ne,
  Gt,
  GtEq,
  Lt,
  LtEq,
  Assign,
  Dot,
  Colon,
  Pipe,
  Comma,
  Semicolon,
  Eof,
};

struct Token {
  Tok type;
  std::string text;  // Data text, Name, decoded String value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;

  bool is_name(const char* name) const { return type == Tok::Name && text == name; }
};

// Throws TemplateError (TemplateSyntaxError) with the line number.
std::vector<Token> tokenize(const std::string& source);

const char* describe(Tok type);  // "end of statement block", "'('", ...

// The body of a string literal decoded as Python's "unicode-escape" does (\n, \x41, \u00e9,
// octal; unknown escapes stay as written). string_literal.cpp.
std::string decode_string_literal(const std::string& raw, int line);

}  // namespace tandem::jinja
