#include "template/str_ops.h"

#include <algorithm>

#include "template/errors.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja::pystr {
namespace {

using unicode::decode;
using unicode::encode;

std::vector<std::string> encode_all(const std::vector<std::u32string>& parts) {
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(encode(p));
  return out;
}

// Whitespace split, left to right.
std::vector<std::u32string> split_ws(const std::u32string& u, int64_t maxsplit) {
  std::vector<std::u32string> out;
  size_t i = 0, n = u.size();
  while (true) {
    while (i < n && unicode::is_space(u[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(u.substr(i));
      break;
    }
    size_t j = i;
    while (j < n && !unicode::is_space(u[j])) ++j;
    out.push_back(u.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::u32string> rsplit_ws(const std::u32string& u, int64_t maxsplit) {
  std::vector<std::u32string> out;
  int64_t i = static_cast<int64_t>(u.size()) - 1;
  while (true) {
    while (i >= 0 && unicode::is_space(u[i])) --i;
    if (i < 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(u.substr(0, i + 1));
      break;
    }
    int64_t j = i;
    while (j >= 0 && !unicode::is_space(u[j])) --j;
    out.push_back(u.substr(j + 1, i - j));
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

bool is_cased(char32_t c) {
  return unicode::is_upper(c) || unicode::is_lower(c);
}

}  // namespace

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string u = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : unicode::is_space(c);
  };
  size_t a = 0, b = u.size();
  if (left)
    while (a < b && strip_it(u[a])) ++a;
  if (right)
    while (b > a && strip_it(u[b - 1])) --b;
  return encode(std::u32string_view(u).substr(a, b - a));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  if (!sep) return encode_all(split_ws(decode(s), maxsplit));
  if (sep->empty()) raise(ErrorKind::Value, "empty separator");
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  if (!sep) return encode_all(rsplit_ws(decode(s), maxsplit));
  if (sep->empty()) raise(ErrorKind::Value, "empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    if (!unicode::is_linebreak(u[i])) continue;
    size_t brk = (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    size_t end = keepends ? i + brk : i;
    out.push_back(encode(std::u32string_view(u).substr(start, end - start)));
    i += brk - 1;
    start = i + 1;
  }
  if (start < u.size()) out.push_back(encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // inserts `with` around every code point
    std::u32string u = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        append_charged(out, with);
        ++done;
      }
      if (i < u.size()) unicode::append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    append_charged(out, s.substr(pos, hit - pos));
    append_charged(out, with);
    pos = hit + old.size();
  }
  out += s.substr(pos);
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = unicode::next(s, pos);
    if (is_cased(c)) {
      unicode::append(out, prev_cased ? unicode::to_lower(c) : unicode::to_upper(c));
      prev_cased = true;
    } else {
      unicode::append(out, c);
      prev_cased = false;
    }
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    bool first = pos == 0;
    char32_t c = unicode::next(s, pos);
    unicode::append(out, first ? unicode::to_upper(c) : unicode::to_lower(c));
  }
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = unicode::next(s, pos);
    unicode::append(out, unicode::is_upper(c) ? unicode::to_lower(c) : unicode::to_upper(c));
  }
  return out;
}

Span adjust_span(std::optional<int64_t> start, std::optional<int64_t> end, int64_t len) {
  auto fix = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t i = *v < 0 ? *v + len : *v;
    return std::clamp<int64_t>(i, 0, len);
  };
  return {fix(start, 0), fix(end, len)};
}

std::string substr(std::string_view s, int64_t start, int64_t end) {
  if (unicode::is_ascii(s)) return std::string(s.substr(start, std::max<int64_t>(end - start, 0)));
  std::u32string u = decode(s);
  return encode(std::u32string_view(u).substr(start, std::max<int64_t>(end - start, 0)));
}

int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse) {
  std::u32string u = decode(s), needle = decode(sub);
  Span sp = adjust_span(start, end, static_cast<int64_t>(u.size()));
  if (sp.end - sp.start < static_cast<int64_t>(needle.size())) {
    return (needle.empty() && sp.start <= static_cast<int64_t>(u.size()) && sp.start <= sp.end)
               ? sp.start
               : -1;
  }
  std::u32string_view hay = std::u32string_view(u).substr(sp.start, sp.end - sp.start);
  size_t hit = reverse ? hay.rfind(needle) : hay.find(needle);
  return hit == std::u32string_view::npos ? -1 : sp.start + static_cast<int64_t>(hit);
}

int64_t count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
              std::optional<int64_t> end) {
  std::u32string u = decode(s), needle = decode(sub);
  Span sp = adjust_span(start, end, static_cast<int64_t>(u.size()));
  if (sp.end < sp.start) return 0;
  if (needle.empty()) return sp.end - sp.start + 1;
  std::u32string_view hay = std::u32string_view(u).substr(sp.start, sp.end - sp.start);
  int64_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::u32string_view::npos;
       pos = hay.find(needle, pos + needle.size()))
    ++n;
  return n;
}

std::string pad(std::string_view s, int64_t width, char32_t fill, char align) {
  int64_t len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return std::string(s);
  int64_t total = width - len;
  charge_render(saturating_product(size_t(total), 4));
  int64_t left = align == '<' ? 0 : align == '>' ? total : total / 2 + (total & width & 1);
  std::string f;
  unicode::append(f, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += f;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += f;
  return out;
}

std::string zfill(std::string_view s, int64_t width) {
  int64_t len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return std::string(s);
  size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  charge_render(size_t(width - len));
  return std::string(s.substr(0, sign)) + std::string(width - len, '0') +
         std::string(s.substr(sign));
}

}  // namespace tandem::jinja::pystr
