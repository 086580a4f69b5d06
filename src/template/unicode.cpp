// Python's str semantics over core/utf8: code points with surrogateescape for invalid
// bytes, and the character classes as CPython defines them (Objects/unicodectype.c).
#include "template/unicode.h"

#include "core/utf8.h"

namespace tandem::jinja::unicode {

namespace {

// Invalid bytes travel as U+DC80..U+DCFF (Python's surrogateescape).
constexpr char32_t kEscapeBase = 0xDC00;

bool is_escaped_byte(char32_t c) {
  return c >= 0xDC80 && c <= 0xDCFF;
}

}  // namespace

void append(std::string& out, char32_t c) {
  if (is_escaped_byte(c))
    out.push_back(static_cast<char>(c - kEscapeBase));
  else
    utf8::append(out, c);
}

char32_t next(std::string_view s, size_t& pos) {
  const utf8::Sequence seq = utf8::scan(s, pos);
  if (!seq.valid) return kEscapeBase + static_cast<unsigned char>(s[pos++]);
  return utf8::next_valid(s, pos);
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(next(s, pos));
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) next(s, pos);
  return n;
}

// str.isspace: bidirectional class WS, B or S, or category Zs.
bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return utf8::is_bidi_space(c) || utf8::category(c) == utf8::Category::Zs;
}

bool is_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_digit(char32_t c) {
  return utf8::is_digit(c);
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return utf8::is_letter(utf8::category(c));
}

// str.isalnum: isalpha, isdecimal, isdigit or isnumeric — letters and numbers.
bool is_alnum(char32_t c) {
  if (c < 0x80) return is_alpha(c) || (c >= '0' && c <= '9');
  const utf8::Category k = utf8::category(c);
  return utf8::is_letter(k) || utf8::is_number(k);
}

bool is_word(char32_t c) {
  return is_alnum(c) || c == '_';
}

// str.isprintable: not a separator other than ' ', and not Cc, Cf, Cs, Co or Cn.
bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  if (is_escaped_byte(c)) return false;
  const utf8::Category k = utf8::category(c);
  return !utf8::is_other(k) && k != utf8::Category::Zs && k != utf8::Category::Zl &&
         k != utf8::Category::Zp;
}

bool is_upper(char32_t c) {
  return utf8::is_uppercase(c);
}

bool is_lower(char32_t c) {
  return utf8::is_lowercase(c);
}

char32_t to_upper(char32_t c) {
  return utf8::to_upper(c);
}

char32_t to_lower(char32_t c) {
  return utf8::to_lower(c);
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = next(s, pos);
    if (is_escaped_byte(c))
      append(out, c);
    else
      utf8::append_upper(out, c);
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = next(s, pos);
    if (is_escaped_byte(c))
      append(out, c);
    else
      utf8::append_lower(out, c);
  }
  return out;
}

}  // namespace tandem::jinja::unicode
