#include "grammar/regex.h"

#include <optional>
#include <vector>

#include "grammar/grammar_error.h"

namespace tandem::grammar {

namespace {

CodepointSet digit_set() {
  return CodepointSet::range('0', '9');
}

CodepointSet word_set() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}

CodepointSet space_set() {
  CodepointSet s = CodepointSet::range('\t', '\r');  // \t \n \v \f \r
  for (char32_t c : {U' ', U'\u00a0', U'\u1680', U'\u2028', U'\u2029', U'\u202f', U'\u205f',
                     U'\u3000', U'\ufeff'})
    s.add(c, c);
  s.add(0x2000, 0x200a);
  return s;
}

CodepointSet dot_set() {
  CodepointSet s = CodepointSet::all();
  CodepointSet line_ends;
  for (char32_t c : {U'\n', U'\r', U'\u2028', U'\u2029'}) line_ends.add(c, c);
  return s.minus(line_ends);
}

class RegexParser {
 public:
  RegexParser(GrammarIr& ir, std::string_view pattern, const RegexContext& ctx)
      : ir_(ir), ctx_(ctx), source_(pattern) {
    for (size_t pos = 0; pos < pattern.size();) {
      std::optional<char32_t> c = utf8_decode(pattern, pos);
      if (!c) fail_at(text_.size(), "the pattern is not valid UTF-8");
      text_.push_back(*c);
    }
  }

  CompiledRegex parse() {
    CompiledRegex out = top_alternative();
    while (eat('|')) out = either(out, top_alternative());
    if (pos_ < text_.size()) fail_at(pos_, "unmatched ')'");
    return out;
  }

 private:
  [[noreturn]] void fail_at(size_t pos, std::string_view why) {
    grammar_fail(ctx_.path, ctx_.keyword, "regex /{}/ at character {}: {}", source_, pos, why);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0;
  }
  bool eat(char32_t c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // One top-level alternative with its anchors; in search mode an unanchored side may be
  // surrounded by anything.
  CompiledRegex top_alternative() {
    bool anchored_start = eat('^');
    CompiledRegex body = sequence(0);
    bool anchored_end = eat('$');  // sequence() stops at '$' only before the end or a '|'
    if (!ctx_.search || (anchored_start && anchored_end)) return body;
    ExprId any = ir_.star(ctx_.encode(ir_, CodepointSet::all()));
    ExprId e =
        ir_.seq({anchored_start ? ir_.empty() : any, body.expr, anchored_end ? ir_.empty() : any});
    return {e, {body.length.min, std::nullopt}};
  }

  CompiledRegex either(const CompiledRegex& a, const CompiledRegex& b) {
    std::optional<uint64_t> max;
    if (a.length.max && b.length.max) max = std::max(*a.length.max, *b.length.max);
    return {ir_.alt({a.expr, b.expr}), {std::min(a.length.min, b.length.min), max}};
  }

  CompiledRegex alternation(int depth) {
    CompiledRegex out = sequence(depth);
    while (eat('|')) out = either(out, sequence(depth));
    return out;
  }

  CompiledRegex sequence(int depth) {
    std::vector<ExprId> parts;
    RegexLength length{0, 0};
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && depth == 0 && (pos_ + 1 == text_.size() || peek(1) == '|')) break;
      CompiledRegex part = quantified(depth);
      parts.push_back(part.expr);
      length.min += part.length.min;
      if (length.max && part.length.max)
        *length.max += *part.length.max;
      else
        length.max.reset();
    }
    return {ir_.seq(std::move(parts)), length};
  }

  CompiledRegex quantified(int depth) {
    CompiledRegex e = atom(depth);
    uint32_t min = 1;
    std::optional<uint32_t> max = 1;
    if (eat('*')) {
      min = 0, max = std::nullopt;
    } else if (eat('+')) {
      min = 1, max = std::nullopt;
    } else if (eat('?')) {
      min = 0, max = 1;
    } else if (!braces(min, max)) {
      return e;
    }
    eat('?');  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && is_braces()))
      fail_at(pos_, "a quantifier cannot follow a quantifier");
    std::optional<uint64_t> max_length;
    if (max && e.length.max) max_length = *max * *e.length.max;
    if (max && *max == 0) max_length = 0;
    return {ir_.repeat(e.expr, min, max), {min * e.length.min, max_length}};
  }

  // Whether the text at pos_ is a {n}, {n,} or {n,m} quantifier (otherwise '{' is literal).
  bool is_braces() const {
    size_t p = pos_ + 1, digits = 0;
    while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') ++p, ++digits;
    if (digits == 0) return false;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') ++p;
    }
    return p < text_.size() && text_[p] == '}';
  }

  bool braces(uint32_t& min, std::optional<uint32_t>& max) {
    if (peek() != '{' || !is_braces()) return false;
    ++pos_;
    min = number();
    max = min;
    if (eat(',')) max = peek() == '}' ? std::nullopt : std::optional<uint32_t>(number());
    eat('}');
    if (max && *max < min) fail_at(pos_, "numbers out of order in {} quantifier");
    return true;
  }

  uint32_t number() {
    uint64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) fail_at(pos_, "repetition counts above 10000 are not supported");
      ++pos_;
    }
    return uint32_t(v);
  }

  CompiledRegex one_char(const CodepointSet& set) { return {ctx_.encode(ir_, set), {1, 1}}; }

  CompiledRegex atom(int depth) {
    if (depth > kMaxDepth) fail_at(pos_, "groups nested too deeply");
    size_t start = pos_;
    char32_t c = text_[pos_++];
    switch (c) {
      case '(':
        return group(depth, start);
      case '[':
        return one_char(char_class());
      case '.':
        return one_char(dot_set());
      case '\\':
        return one_char(escape(/*in_class=*/false));
      case '^':
        fail_at(start, "'^' is supported only at the start");
      case '$':
        fail_at(start, "'$' is supported only at the end");
      case '*':
      case '+':
      case '?':
        fail_at(start, "nothing to repeat");
      case '{': {
        --pos_;
        bool quantifier = is_braces();
        ++pos_;
        if (quantifier) fail_at(start, "nothing to repeat");
        return one_char(CodepointSet::single(c));
      }
      default:
        return one_char(CodepointSet::single(c));
    }
  }

  CompiledRegex group(int depth, size_t start) {
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
        while (!at_end() && peek() != '>') ++pos_;
        if (!eat('>')) fail_at(start, "unterminated group name");
      } else {
        fail_at(start, "lookaround and inline flags are not supported");
      }
    }
    CompiledRegex e = alternation(depth + 1);
    if (!eat(')')) fail_at(start, "unterminated group");
    return e;
  }

  CodepointSet char_class() {
    size_t start = pos_ - 1;
    bool negate = eat('^');
    CodepointSet set;
    while (true) {
      if (at_end()) fail_at(start, "unterminated character class");
      if (eat(']')) break;
      CodepointSet lo = class_atom();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        CodepointSet hi = class_atom();
        if (lo.ranges().size() != 1 || hi.ranges().size() != 1 ||
            lo.ranges()[0].first != lo.ranges()[0].second ||
            hi.ranges()[0].first != hi.ranges()[0].second)
          fail_at(pos_, "a class escape cannot bound a range");
        char32_t a = lo.ranges()[0].first, b = hi.ranges()[0].first;
        if (a > b) fail_at(pos_, "range out of order in character class");
        set.add(a, b);
      } else {
        set.add(lo);
      }
    }
    return negate ? set.complement() : set;
  }

  CodepointSet class_atom() {
    char32_t c = text_[pos_++];
    if (c == '\\') return escape(/*in_class=*/true);
    return CodepointSet::single(c);
  }

  CodepointSet escape(bool in_class) {
    size_t start = pos_ - 1;
    if (at_end()) fail_at(start, "a pattern cannot end in '\\'");
    char32_t c = text_[pos_++];
    switch (c) {
      case 'd':
        return digit_set();
      case 'D':
        return digit_set().complement();
      case 'w':
        return word_set();
      case 'W':
        return word_set().complement();
      case 's':
        return space_set();
      case 'S':
        return space_set().complement();
      case 'n':
        return CodepointSet::single('\n');
      case 'r':
        return CodepointSet::single('\r');
      case 't':
        return CodepointSet::single('\t');
      case 'f':
        return CodepointSet::single('\f');
      case 'v':
        return CodepointSet::single('\v');
      case '0':
        if (peek() >= '0' && peek() <= '9') fail_at(start, "octal escapes are not supported");
        return CodepointSet::single(0);
      case 'x':
        return CodepointSet::single(hex_digits(2, start));
      case 'u':
        return CodepointSet::single(unicode_escape(start));
      case 'b':
        if (in_class) return CodepointSet::single('\b');
        fail_at(start, "word boundaries (\\b) are not supported");
      case 'B':
        fail_at(start, "word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        fail_at(start, "Unicode property escapes (\\p{...}) are not supported");
      case 'k':
        fail_at(start, "backreferences are not supported");
      case 'c':
        fail_at(start, "control escapes (\\cX) are not supported");
      default:
        if (c >= '1' && c <= '9') fail_at(start, "backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail_at(start, "unknown escape");
        return CodepointSet::single(c);  // identity escape of punctuation
    }
  }

  char32_t hex_digits(int n, size_t start) {
    char32_t v = 0;
    for (int i = 0; i < n; ++i) {
      std::optional<int> d = hex_value(peek());
      if (!d) fail_at(start, "malformed hexadecimal escape");
      v = v * 16 + char32_t(*d);
      ++pos_;
    }
    return v;
  }

  char32_t unicode_escape(size_t start) {
    char32_t v;
    if (eat('{')) {
      v = 0;
      size_t digits = 0;
      while (hex_value(peek())) {
        v = v * 16 + char32_t(*hex_value(peek()));
        ++pos_;
        if (++digits > 6) fail_at(start, "malformed \\u{...} escape");
      }
      if (digits == 0 || !eat('}')) fail_at(start, "malformed \\u{...} escape");
    } else {
      v = hex_digits(4, start);
      // A surrogate pair written as two escapes is one character.
      if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
        size_t save = pos_;
        pos_ += 2;
        char32_t lo = hex_digits(4, start);
        if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        pos_ = save;
      }
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF))
      fail_at(start, "the escape is not a Unicode scalar value");
    return v;
  }

  static std::optional<int> hex_value(char32_t c) {
    if (c >= '0' && c <= '9') return int(c - '0');
    if (c >= 'a' && c <= 'f') return int(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return int(c - 'A' + 10);
    return std::nullopt;
  }

  GrammarIr& ir_;
  const RegexContext& ctx_;
  std::string_view source_;
  std::vector<char32_t> text_;
  size_t pos_ = 0;
};

}  // namespace

CompiledRegex compile_regex(GrammarIr& ir, std::string_view pattern, const RegexContext& ctx) {
  return RegexParser(ir, pattern, ctx).parse();
}

CharEncoder raw_utf8_encoder() {
  return [](GrammarIr& ir, const CodepointSet& set) { return utf8_expr(ir, set); };
}

}  // namespace tandem::grammar
