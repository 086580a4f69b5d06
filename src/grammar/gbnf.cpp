#include "grammar/gbnf.h"

#include <map>
#include <optional>
#include <set>
#include <string>

#include "grammar/codepoint_set.h"
#include "grammar/grammar_error.h"

namespace tandem::grammar {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  GbnfParser(GrammarIr& ir, std::string_view text) : ir_(ir), text_(text) {}

  void parse() {
    skip_space(/*newlines=*/true);
    while (!at_end()) {
      rule();
      skip_space(true);
    }
    std::optional<RuleId> root = ir_.find_rule("root");
    if (!root || !defined_.contains(*root)) fail_at(0, "the grammar has no 'root' rule");
    for (const auto& [rule, pos] : first_use_)
      if (!defined_.contains(rule))
        fail_at(pos, fmt::format("rule '{}' is used but never defined", ir_.rule(rule).name));
    ir_.set_root(*root);
  }

 private:
  [[noreturn]] void fail_at(size_t pos, std::string_view why) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, col = 0;
      ++col;
    }
    grammar_fail(fmt::format("line {}, column {}", line, col), "grammar", "{}", why);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string name() {
    size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (start == pos_) fail_at(pos_, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  RuleId rule_named(const std::string& n) {
    if (auto r = ir_.find_rule(n)) return *r;
    return ir_.add_rule(n);
  }

  void rule() {
    size_t start = pos_;
    RuleId r = rule_named(name());
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail_at(pos_, "expected '::='");
    pos_ += 3;
    if (!defined_.insert(r).second)
      fail_at(start, fmt::format("rule '{}' is defined twice", ir_.rule(r).name));
    skip_space(true);
    ir_.set_body(r, alternatives(0));
    if (!at_end() && peek() != '\n' && peek() != '\r')
      fail_at(pos_, "expected the end of the line");
  }

  ExprId alternatives(int depth) {
    std::vector<ExprId> options = {sequence(depth)};
    while (true) {
      // At the top level a line that starts with '|' also continues the rule.
      size_t save = pos_;
      skip_space(true);
      if (peek() != '|') {
        pos_ = save;
        break;
      }
      ++pos_;
      skip_space(true);
      options.push_back(sequence(depth));
    }
    return ir_.alt(std::move(options));
  }

  ExprId sequence(int depth) {
    std::vector<ExprId> parts;
    while (true) {
      skip_space(depth > 0);
      char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
      // The next rule's "name ::=" ends this one even on the same line in llama.cpp's
      // reading; here a rule ends at its line's end, so a name is always a reference.
      parts.push_back(quantified(depth));
    }
    return ir_.seq(std::move(parts));
  }

  ExprId quantified(int depth) {
    ExprId e = element(depth);
    while (true) {
      if (peek() == '*') {
        ++pos_, e = ir_.star(e);
      } else if (peek() == '+') {
        ++pos_, e = ir_.plus(e);
      } else if (peek() == '?') {
        ++pos_, e = ir_.optional(e);
      } else if (peek() == '{') {
        e = braces(e);
      } else {
        return e;
      }
    }
  }

  ExprId braces(ExprId e) {
    size_t start = pos_++;
    skip_space(false);
    uint32_t min = number(start);
    std::optional<uint32_t> max = min;
    skip_space(false);
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      max = peek() == '}' ? std::nullopt : std::optional<uint32_t>(number(start));
      skip_space(false);
    }
    if (peek() != '}') fail_at(start, "expected '}' closing the repetition");
    ++pos_;
    if (max && *max < min) fail_at(start, "repetition bounds out of order");
    return ir_.repeat(e, min, max);
  }

  uint32_t number(size_t start) {
    if (!(peek() >= '0' && peek() <= '9')) fail_at(pos_, "expected a number");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > kMaxRepeat) fail_at(start, "repetition counts above 10000 are not supported");
      ++pos_;
    }
    return uint32_t(v);
  }

  ExprId element(int depth) {
    if (depth > kMaxDepth) fail_at(pos_, "groups nested too deeply");
    size_t start = pos_;
    char c = peek();
    if (c == '"') return literal();
    if (c == '[') return utf8_expr(ir_, char_class());
    if (c == '.') {
      ++pos_;
      return utf8_expr(ir_, CodepointSet::all());
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      ExprId e = alternatives(depth + 1);
      skip_space(true);
      if (peek() != ')') fail_at(start, "unterminated '('");
      ++pos_;
      return e;
    }
    if (c == '<') fail_at(pos_, "token references (<...>) are not supported");
    if (is_name_char(c)) {
      RuleId r = rule_named(name());
      first_use_.try_emplace(r, start);
      return ir_.ref(r);
    }
    fail_at(pos_, fmt::format("unexpected character '{}'", c));
  }

  ExprId literal() {
    size_t start = pos_++;
    std::string bytes;
    while (true) {
      if (at_end() || peek() == '\n') fail_at(start, "unterminated string literal");
      if (peek() == '"') break;
      bytes += utf8_encode(character(start));
    }
    ++pos_;
    return ir_.literal(bytes);
  }

  CodepointSet char_class() {
    size_t start = pos_++;
    bool negate = peek() == '^';
    if (negate) ++pos_;
    CodepointSet set;
    while (true) {
      if (at_end() || peek() == '\n') fail_at(start, "unterminated character class");
      if (peek() == ']') break;
      char32_t lo = character(start);
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0' && peek(1) != '\n') {
        ++pos_;
        char32_t hi = character(start);
        if (hi < lo) fail_at(start, "character range out of order");
        set.add(lo, hi);
      } else {
        set.add(lo, lo);
      }
    }
    ++pos_;
    return negate ? set.complement() : set;
  }

  // One character of a literal or class: UTF-8, or an escape.
  char32_t character(size_t start) {
    if (peek() != '\\') {
      size_t p = pos_;
      std::optional<char32_t> c = utf8_decode(text_, p);
      if (!c) fail_at(pos_, "the grammar is not valid UTF-8");
      pos_ = p;
      return *c;
    }
    ++pos_;
    char e = peek();
    ++pos_;
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
        return char32_t(e);
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      default:
        fail_at(pos_ - 2, fmt::format("unknown escape '\\{}'", e));
    }
  }

  char32_t hex(int n) {
    size_t start = pos_;
    char32_t v = 0;
    for (int i = 0; i < n; ++i) {
      char c = peek();
      std::optional<char32_t> d;
      if (c >= '0' && c <= '9') d = char32_t(c - '0');
      if (c >= 'a' && c <= 'f') d = char32_t(c - 'a' + 10);
      if (c >= 'A' && c <= 'F') d = char32_t(c - 'A' + 10);
      if (!d) fail_at(start, "malformed hexadecimal escape");
      v = v * 16 + *d;
      ++pos_;
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF))
      fail_at(start, "the escape is not a Unicode scalar value");
    return v;
  }

  GrammarIr& ir_;
  std::string_view text_;
  size_t pos_ = 0;
  std::set<RuleId> defined_;
  std::map<RuleId, size_t> first_use_;
};

}  // namespace

void compile_gbnf(GrammarIr& ir, std::string_view text) {
  GbnfParser(ir, text).parse();
}

}  // namespace tandem::grammar
