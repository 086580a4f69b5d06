#include "template/py_format.h"

#include <cmath>
#include <cstdio>

#include "template/errors.h"
#include "template/py_repr.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

struct Spec {
  char32_t fill = ' ';
  char align = 0;  // < > = ^ or 0 (type default)
  char sign = '-';
  bool alternate = false;
  int width = -1;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};

Spec parse_spec(const std::string& spec) {
  Spec s;
  std::u32string u = unicode::decode(spec);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  if (u.size() >= 2 && is_align(u[1])) {
    s.fill = u[0];
    s.align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && is_align(u[0])) {
    s.align = static_cast<char>(u[0]);
    i = 1;
  }
  if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' '))
    s.sign = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '#') s.alternate = (++i, true);
  if (i < u.size() && u[i] == '0') {
    if (!s.align) {
      s.fill = '0';
      s.align = '=';
    }
    ++i;
  }
  auto read_int = [&]() {
    int n = 0;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9') n = n * 10 + static_cast<int>(u[i++] - '0');
    return n;
  };
  if (i < u.size() && u[i] >= '0' && u[i] <= '9') s.width = read_int();
  if (i < u.size() && (u[i] == ',' || u[i] == '_')) s.grouping = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '.') {
    ++i;
    if (i >= u.size() || u[i] < '0' || u[i] > '9')
      raise(ErrorKind::Value, "Format specifier missing precision");
    s.precision = read_int();
  }
  if (i < u.size()) s.type = static_cast<char>(u[i++]);
  if (i < u.size()) raise(ErrorKind::Value, "Invalid format specifier '{}'", spec);
  return s;
}

std::string group_digits(const std::string& digits, char sep, int every) {
  std::string out;
  int n = static_cast<int>(digits.size());
  for (int k = 0; k < n; ++k) {
    if (k > 0 && (n - k) % every == 0) out.push_back(sep);
    out.push_back(digits[k]);
  }
  return out;
}

// Pads `body` (sign/prefix separated so '=' alignment can pad between them).
std::string pad(const std::string& prefix, const std::string& body, const Spec& s, char def_align) {
  size_t len = unicode::length(prefix) + unicode::length(body);
  if (s.width < 0 || len >= static_cast<size_t>(s.width)) return prefix + body;
  size_t total = s.width - len;
  charge_render(saturating_product(total, 4));
  std::string fill;
  unicode::append(fill, s.fill);
  auto fills = [&](size_t n) {
    std::string out;
    for (size_t k = 0; k < n; ++k) out += fill;
    return out;
  };
  switch (s.align ? s.align : def_align) {
    case '<':
      return prefix + body + fills(total);
    case '^':
      return fills(total / 2) + prefix + body + fills(total - total / 2);
    case '=':
      return prefix + fills(total) + body;
    default:
      return fills(total) + prefix + body;
  }
}

std::string sign_text(bool negative, char sign) {
  if (negative) return "-";
  return sign == '+' ? "+" : sign == ' ' ? " " : "";
}

std::string format_int(int64_t v, const Spec& s) {
  bool neg = v < 0;
  uint64_t mag = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits, prefix;
  switch (s.type) {
    case 'b': {
      do digits.insert(digits.begin(), static_cast<char>('0' + (mag & 1)));
      while (mag >>= 1);
      if (s.alternate) prefix = "0b";
      break;
    }
    case 'o':
      digits = fmt::format("{:o}", mag);
      if (s.alternate) prefix = "0o";
      break;
    case 'x':
      digits = fmt::format("{:x}", mag);
      if (s.alternate) prefix = "0x";
      break;
    case 'X':
      digits = fmt::format("{:X}", mag);
      if (s.alternate) prefix = "0X";
      break;
    case 'c': {
      std::string ch;
      unicode::append(ch, static_cast<char32_t>(v));
      return pad("", ch, s, '<');
    }
    default:
      digits = std::to_string(mag);
  }
  if (s.grouping)
    digits = group_digits(digits, s.grouping, s.type && s.type != 'd' && s.type != 'n' ? 4 : 3);
  return pad(sign_text(neg, s.sign) + prefix, digits, s, '>');
}

std::string c_float(double v, char type, int precision, bool alternate) {
  std::string f = std::string("%") + (alternate ? "#" : "") + ".*" + type;
  char buf[512];
  std::snprintf(buf, sizeof buf, f.c_str(), precision, v);
  return buf;
}

std::string format_float(double v, const Spec& s) {
  bool neg = std::signbit(v) && !std::isnan(v);
  double mag = std::fabs(v);
  std::string body;
  char type = s.type;
  if (type == '%') {
    body = c_float(mag * 100, 'f', s.precision < 0 ? 6 : s.precision, s.alternate) + "%";
  } else if (type == 0 && s.precision < 0) {
    body = float_repr(mag);
  } else if (type == 0) {
    body = c_float(mag, 'g', std::max(s.precision, 1), s.alternate);
    if (std::isfinite(mag) && body.find_first_of(".e") == std::string::npos) body += ".0";
  } else {
    if (type == 'n') type = 'g';
    body = c_float(mag, type, s.precision < 0 ? 6 : s.precision, s.alternate);
  }
  if (s.grouping && std::isfinite(mag)) {
    size_t end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, end), s.grouping, 3) +
           (end == std::string::npos ? "" : body.substr(end));
  }
  return pad(sign_text(neg, s.sign), body, s, '>');
}

std::string format_string(const std::string& str, const Spec& s) {
  if (s.sign != '-') raise(ErrorKind::Value, "Sign not allowed in string format specifier");
  if (s.align == '=')
    raise(ErrorKind::Value, "'=' alignment not allowed in string format specifier");
  if (s.type && s.type != 's')
    raise(ErrorKind::Value, "Unknown format code '{}' for object of type 'str'", s.type);
  std::string body = str;
  if (s.precision >= 0) {
    std::u32string u = unicode::decode(str);
    if (u.size() > static_cast<size_t>(s.precision))
      body = unicode::encode(u.substr(0, s.precision));
  }
  return pad("", body, s, '<');
}

}  // namespace

std::string format_value(const Value& v, const std::string& spec) {
  if (spec.empty()) return py_str(v);
  Spec s = parse_spec(spec);
  switch (v.kind()) {
    case Kind::String:
      return format_string(v.as_string(), s);
    case Kind::Int:
    case Kind::Bool:
      if (s.type && std::string("eEfFgG%").find(s.type) != std::string::npos)
        return format_float(v.as_float(), s);
      if (s.type == 's')
        raise(ErrorKind::Value, "Unknown format code 's' for object of type '{}'", v.type_name());
      return format_int(v.as_int(), s);
    case Kind::Float:
      if (s.type && std::string("eEfFgGn%").find(s.type) == std::string::npos)
        raise(ErrorKind::Value, "Unknown format code '{}' for object of type 'float'", s.type);
      return format_float(v.as_float(), s);
    default:
      raise(ErrorKind::Type, "unsupported format string passed to {}.__format__", v.type_name());
  }
}

}  // namespace tandem::jinja
