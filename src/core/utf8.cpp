#include "core/utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace tandem::utf8 {

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

Sequence scan(std::string_view s, size_t i) {
  const unsigned char b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, true, false};
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {k, false, true};
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return {k, false, false};
  }
  return {len, true, false};
}

size_t count_chars(std::string_view s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

bool is_valid(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const Sequence seq = scan(bytes, i);
    if (!seq.valid) return false;
    i += seq.length;
  }
  return true;
}

std::string to_valid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Sequence seq = scan(bytes, i);
    if (seq.valid)
      out.append(bytes.substr(i, seq.length));
    else
      out.append(kReplacementUtf8);
    i += seq.length;
  }
  return out;
}

size_t settled_prefix(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const Sequence seq = scan(bytes, i);
    if (seq.truncated) return i;
    i += seq.length;
  }
  return bytes.size();
}

size_t floor_char_boundary(std::string_view s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

namespace {

std::string utf8proc_normalize(std::string_view s, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &result,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  if (n < 0) fail("unicode normalization failed: {}", utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace

// ASCII characters are unchanged by all four forms, are starters (so canonical reordering
// never moves anything across them) and never compose with what precedes them. So the text
// splits before every ASCII character into parts that normalize independently; only each
// non-ASCII run, with the ASCII character before it (which may compose with a following
// mark, as e + U+0301 -> é), goes through utf8proc.
std::string normalize(std::string_view s, NormalForm form) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && static_cast<unsigned char>(s[run]) < 0x80) ++run;
    if (run == s.size()) {
      out.append(s.substr(i));
      break;
    }
    const size_t begin = run > i ? run - 1 : run;  // the preceding ASCII character joins the run
    out.append(s.substr(i, begin - i));
    size_t end = run;
    while (end < s.size() && static_cast<unsigned char>(s[end]) >= 0x80) ++end;
    out += utf8proc_normalize(s.substr(begin, end - begin), form);
    i = end;
  }
  return out;
}

}  // namespace tandem::utf8
