#include "template/lexer.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/ascii.h"
#include "template/errors.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

// "\r\n" and "\r" become "\n"; one trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the run of Python whitespace (regex \s) starting at pos.
size_t space_run(const std::string& s, size_t pos) {
  size_t p = pos;
  while (p < s.size()) {
    size_t q = p;
    if (!unicode::is_space(unicode::next(s, q))) break;
    p = q;
  }
  return p - pos;
}

bool all_space(std::string_view s) {
  for (size_t p = 0; p < s.size();)
    if (!unicode::is_space(unicode::next(s, p))) return false;
  return true;
}

// str.rstrip(): drops trailing Python whitespace.
std::string rstrip_space(const std::string& s) {
  size_t keep = 0;
  for (size_t p = 0; p < s.size();) {
    if (!unicode::is_space(unicode::next(s, p))) keep = p;
  }
  return s.substr(0, keep);
}

size_t count_newlines(std::string_view s, size_t from, size_t to) {
  size_t n = 0;
  for (size_t i = from; i < to; ++i) n += s[i] == '\n';
  return n;
}

struct OpSpelling {
  const char* text;
  Tok type;
};
// Longest first, as jinja2 sorts its operator regex.
constexpr OpSpelling kOperators[] = {
    {"**", Tok::Pow},     {"//", Tok::FloorDiv}, {"==", Tok::Eq},    {"!=", Tok::Ne},
    {">=", Tok::GtEq},    {"<=", Tok::LtEq},     {"+", Tok::Add},    {"-", Tok::Sub},
    {"/", Tok::Div},      {"*", Tok::Mul},       {"%", Tok::Mod},    {"~", Tok::Tilde},
    {"[", Tok::LBracket}, {"]", Tok::RBracket},  {"(", Tok::LParen}, {")", Tok::RParen},
    {"{", Tok::LBrace},   {"}", Tok::RBrace},    {">", Tok::Gt},     {"<", Tok::Lt},
    {"=", Tok::Assign},   {".", Tok::Dot},       {":", Tok::Colon},  {"|", Tok::Pipe},
    {",", Tok::Comma},    {";", Tok::Semicolon},
};

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(normalize_newlines(src)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) lex_root();
    push(Tok::Eof, "");
    return std::move(tokens_);
  }

 private:
  enum class TagKind { Raw, Comment, Block, Variable };

  bool at(size_t p, const char* lit) const { return s_.compare(p, std::strlen(lit), lit) == 0; }

  void push(Tok type, std::string text) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})` at p: the end of the match, or 0.
  size_t match_raw_begin(size_t p) const {
    size_t q = p + 2;
    if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ++q;
    q += space_run(s_, q);
    if (!at(q, "raw")) return 0;
    q += 3;
    q += space_run(s_, q);
    if (at(q, "-%}")) return q + 3 + space_run(s_, q + 3);
    if (at(q, "%}")) return q + 2;
    return 0;
  }

  // Applies `-` / lstrip_blocks to the text before a tag whose sign is `sign`.
  std::string strip_before(std::string text, char sign, bool is_variable) const {
    if (sign == '-') return rstrip_space(text);
    if (sign == '+' || is_variable) return text;
    size_t l_pos = text.rfind('\n');
    l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
    if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
        all_space(std::string_view(text).substr(l_pos)))
      text.resize(l_pos);
    return text;
  }

  void emit_data(const std::string& text, size_t from, size_t to) {
    if (!text.empty()) push(Tok::Data, text);
    line_ += static_cast<int>(count_newlines(s_, from, to));
  }

  void lex_root() {
    size_t p = pos_;
    while ((p = s_.find('{', p)) != std::string::npos) {
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) break;
      ++p;
    }
    if (p == std::string::npos) {
      emit_data(s_.substr(pos_), pos_, s_.size());
      pos_ = s_.size();
      return;
    }
    size_t raw_end = s_[p + 1] == '%' ? match_raw_begin(p) : 0;
    TagKind kind = raw_end            ? TagKind::Raw
                   : s_[p + 1] == '#' ? TagKind::Comment
                   : s_[p + 1] == '%' ? TagKind::Block
                                      : TagKind::Variable;
    char sign = p + 2 < s_.size() && (s_[p + 2] == '-' || s_[p + 2] == '+') ? s_[p + 2] : 0;
    emit_data(strip_before(s_.substr(pos_, p - pos_), sign, kind == TagKind::Variable), pos_, p);
    pos_ = p;
    size_t body = p + 2 + (sign ? 1 : 0);
    switch (kind) {
      case TagKind::Raw:
        lex_raw(raw_end);
        break;
      case TagKind::Comment:
        lex_comment(body);
        break;
      case TagKind::Block:
        push(Tok::BlockBegin, "");
        pos_ = body;
        lex_tag(true);
        break;
      case TagKind::Variable:
        push(Tok::VarBegin, "");
        pos_ = body;
        lex_tag(false);
        break;
    }
  }

  // After a closing `%}`-style delimiter at q (pointing past it): the whitespace it eats.
  size_t block_suffix(size_t q, char sign) const {
    if (sign == '-') return q + space_run(s_, q);
    if (sign == '+') return q;
    return q < s_.size() && s_[q] == '\n' ? q + 1 : q;  // trim_blocks
  }

  void finish_tag(size_t end) {
    line_ += static_cast<int>(count_newlines(s_, pos_, end));
    line_starting_ = end > 0 && s_[end - 1] == '\n';
    pos_ = end;
  }

  void lex_comment(size_t body) {
    size_t close = s_.find("#}", body);
    if (close == std::string::npos) raise_syntax(line_, "Missing end of comment tag");
    char sign = close > body && (s_[close - 1] == '-' || s_[close - 1] == '+') ? s_[close - 1] : 0;
    finish_tag(block_suffix(close + 2, sign));
  }

  void lex_raw(size_t begin_end) {
    line_ += static_cast<int>(count_newlines(s_, pos_, begin_end));
    for (size_t p = s_.find("{%", begin_end); p != std::string::npos; p = s_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = q < s_.size() && (s_[q] == '-' || s_[q] == '+') ? s_[q] : 0;
      if (sign) ++q;
      q += space_run(s_, q);
      if (!at(q, "endraw")) continue;
      q += 6;
      q += space_run(s_, q);
      char end_sign = at(q, "+%}") ? '+' : at(q, "-%}") ? '-' : at(q, "%}") ? ' ' : 0;
      if (!end_sign) continue;
      q += end_sign == ' ' ? 2 : 3;
      emit_data(strip_before(s_.substr(begin_end, p - begin_end), sign, false), begin_end, p);
      pos_ = p;
      finish_tag(block_suffix(q, end_sign == ' ' ? 0 : end_sign));
      return;
    }
    raise_syntax(line_, "Missing end of raw directive");
  }

  // Tokens inside `{% ... %}` or `{{ ... }}` up to and including the end delimiter.
  void lex_tag(bool block) {
    std::vector<char> balance;
    while (true) {
      if (pos_ >= s_.size()) return;  // unterminated: the parser reports it
      if (balance.empty() && lex_tag_end(block)) return;
      size_t ws = space_run(s_, pos_);
      if (ws) {
        line_ += static_cast<int>(count_newlines(s_, pos_, pos_ + ws));
        pos_ += ws;
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  bool lex_tag_end(bool block) {
    const char* close = block ? "%}" : "}}";
    if (at(pos_, "-") && at(pos_ + 1, close)) {
      push(block ? Tok::BlockEnd : Tok::VarEnd, "");
      finish_tag(pos_ + 3 + space_run(s_, pos_ + 3));
      return true;
    }
    if (block && at(pos_, "+%}")) {
      push(Tok::BlockEnd, "");
      finish_tag(pos_ + 3);
      return true;
    }
    if (at(pos_, close)) {
      push(block ? Tok::BlockEnd : Tok::VarEnd, "");
      finish_tag(block ? block_suffix(pos_ + 2, 0) : pos_ + 2);
      return true;
    }
    return false;
  }

  bool digit_at(size_t p) const {
    return p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]));
  }

  // (\d+_)*\d+ at p: end of the run, or p when absent.
  size_t digits_run(size_t p) const {
    size_t q = p;
    while (digit_at(q)) {
      while (digit_at(q)) ++q;
      if (q < s_.size() && s_[q] == '_' && digit_at(q + 1)) ++q;
    }
    return q;
  }

  size_t float_end(size_t int_end) const;
  size_t prefixed_int_end(int& base) const;
  bool lex_number();
  bool lex_name();
  bool lex_string();
  void lex_operator(std::vector<char>& balance);

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the previous match ended with "\n"
  std::vector<Token> tokens_;
};

std::string without_underscores(std::string s) {
  std::erase(s, '_');
  return s;
}

// float_re: (?<!\.) digits ( (.digits)? e[+-]?digits | .digits ): the end, or 0 if no float.
size_t Lexer::float_end(size_t int_end) const {
  if (pos_ > 0 && s_[pos_ - 1] == '.') return 0;  // `x.0.1` is x, ., 0, ., 1
  size_t q = int_end;
  bool is_float = false;
  if (q < s_.size() && s_[q] == '.' && digit_at(q + 1)) {
    q = digits_run(q + 1);
    is_float = true;
  }
  if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
    size_t d = q + 1;
    if (d < s_.size() && (s_[d] == '+' || s_[d] == '-')) ++d;
    if (digit_at(d)) {
      q = digits_run(d);
      is_float = true;
    }
  }
  return is_float ? q : 0;
}

// 0x.. / 0o.. / 0b.. at pos_ (digits may be '_'-separated): the end and base, or 0.
size_t Lexer::prefixed_int_end(int& base) const {
  if (s_[pos_] != '0' || pos_ + 1 >= s_.size()) return 0;
  char b = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[pos_ + 1])));
  base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 0;
  if (!base) return 0;
  auto ok = [&](size_t i) {
    if (i >= s_.size()) return false;
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[i])));
    return base == 16 ? ascii_is_hex(c) : c >= '0' && c < '0' + base;
  };
  size_t q = pos_ + 2;
  while (ok(q) || (q < s_.size() && s_[q] == '_' && ok(q + 1))) ++q;
  return q > pos_ + 2 ? q : 0;
}

bool Lexer::lex_number() {
  if (!digit_at(pos_)) return false;
  Token t;
  t.line = line_;
  size_t int_end = digits_run(pos_);
  int base = 10;
  size_t end = float_end(int_end);
  if (end) {
    t.type = Tok::Float;
    t.float_value = std::strtod(without_underscores(s_.substr(pos_, end - pos_)).c_str(), nullptr);
  } else {
    t.type = Tok::Int;
    end = int_end == pos_ + 1 ? prefixed_int_end(base) : 0;
    size_t digits_from = end ? pos_ + 2 : pos_;
    if (!end) {
      end = int_end;
      base = 10;
    }
    std::string digits = without_underscores(s_.substr(digits_from, end - digits_from));
    errno = 0;
    unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
      raise_syntax(line_, "integer literal too large");
    t.int_value = static_cast<int64_t>(v);
  }
  t.text = s_.substr(pos_, end - pos_);
  tokens_.push_back(std::move(t));
  pos_ = end;
  return true;
}

bool Lexer::lex_name() {
  auto start_char = [](unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; };
  auto name_char = [](unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; };
  if (!start_char(static_cast<unsigned char>(s_[pos_]))) return false;
  size_t q = pos_ + 1;
  while (q < s_.size() && name_char(static_cast<unsigned char>(s_[q]))) ++q;
  push(Tok::Name, s_.substr(pos_, q - pos_));
  pos_ = q;
  return true;
}

bool Lexer::lex_string() {
  char quote = s_[pos_];
  if (quote != '\'' && quote != '"') return false;
  size_t q = pos_ + 1;
  while (q < s_.size() && s_[q] != quote) q += s_[q] == '\\' ? 2 : 1;
  if (q >= s_.size())
    raise_syntax(line_,
                 fmt::format("unexpected char {} at {}", quote == '\'' ? "\"'\"" : "'\"'", pos_));
  push(Tok::String, decode_string_literal(s_.substr(pos_ + 1, q - pos_ - 1), line_));
  line_ += static_cast<int>(count_newlines(s_, pos_, q));
  pos_ = q + 1;
  return true;
}

void Lexer::lex_operator(std::vector<char>& balance) {
  for (const OpSpelling& op : kOperators) {
    if (!at(pos_, op.text)) continue;
    char c = op.text[0];
    if (c == '{' || c == '(' || c == '[') {
      balance.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
    } else if (c == '}' || c == ')' || c == ']') {
      if (balance.empty()) raise_syntax(line_, fmt::format("unexpected '{}'", c));
      if (balance.back() != c)
        raise_syntax(line_, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      balance.pop_back();
    }
    push(op.type, op.text);
    pos_ += std::strlen(op.text);
    return;
  }
  raise_syntax(line_, fmt::format("unexpected char '{}' at {}", s_[pos_], pos_));
}

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  return Lexer(source).run();
}

const char* describe(Tok type) {
  switch (type) {
    case Tok::Data:
      return "template data";
    case Tok::VarBegin:
      return "begin of print statement";
    case Tok::VarEnd:
      return "end of print statement";
    case Tok::BlockBegin:
      return "begin of statement block";
    case Tok::BlockEnd:
      return "end of statement block";
    case Tok::Name:
      return "name";
    case Tok::String:
      return "string";
    case Tok::Int:
      return "integer";
    case Tok::Float:
      return "float";
    case Tok::Eof:
      return "end of template";
    default:
      break;
  }
  for (const OpSpelling& op : kOperators)
    if (op.type == type) return op.text;
  return "token";
}

}  // namespace tandem::jinja
