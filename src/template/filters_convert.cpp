// Conversion filters: int, float, round (Python's round-half-even), striptags.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/filters.h"
#include "template/operators.h"
#include "template/py_repr.h"
#include "template/str_ops.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

// Python's int(text, base): whitespace around, sign, '_' between digits, base prefixes.
std::optional<int64_t> parse_int(std::string text, int base) {
  text = pystr::strip(text, std::nullopt, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
  auto prefixed = [&](char p) {
    return i + 1 < text.size() && text[i] == '0' &&
           std::tolower(static_cast<unsigned char>(text[i + 1])) == p;
  };
  if ((base == 16 && prefixed('x')) || (base == 8 && prefixed('o')) ||
      (base == 2 && prefixed('b'))) {
    i += 2;
    if (i < text.size() && text[i] == '_') ++i;
  }
  if (i >= text.size()) return std::nullopt;
  int64_t value = 0;
  bool prev_digit = false;
  for (; i < text.size(); ++i) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    if (c == '_' && prev_digit && i + 1 < text.size()) {
      prev_digit = false;
      continue;
    }
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'z')                    ? c - 'a' + 10
                                                        : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value))
      return std::nullopt;
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  return neg ? -value : value;
}

// Python's float(text): decimal/exponent forms with '_' between digits, inf, nan.
std::optional<double> parse_float(std::string text) {
  text = pystr::strip(text, std::nullopt, true, true);
  std::string lower = unicode::lower(text);
  std::string body = lower;
  bool neg = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.erase(0, 1);
  }
  if (body == "inf" || body == "infinity") return neg ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  std::string clean;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '_') {
      bool ok = i > 0 && i + 1 < body.size() &&
                std::isdigit(static_cast<unsigned char>(body[i - 1])) &&
                std::isdigit(static_cast<unsigned char>(body[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '+' &&
        c != '-')
      return std::nullopt;
    clean.push_back(c);
  }
  if (clean.empty() || clean.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return neg ? -v : v;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value::integer(0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() == Kind::Int || v.kind() == Kind::Bool) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float) {
    double f = v.as_float();
    if (std::isnan(f)) return fallback;
    if (std::isinf(f)) raise(ErrorKind::Overflow, "cannot convert float infinity to integer");
    return Value::integer(float_to_int(f));
  }
  if (!v.is_string()) return fallback;
  if (auto i = parse_int(v.as_string(), static_cast<int>(a.get_int(1, 10))))
    return Value::integer(*i);
  auto f = parse_float(v.as_string());  // "42.23"|int gives 42
  if (!f || !std::isfinite(*f)) return fallback;
  return Value::integer(float_to_int(*f));
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("float", args, {"default"});
  Value fallback = a.get_or(0, Value::number(0.0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (!v.is_string()) return fallback;
  auto f = parse_float(v.as_string());
  return f ? Value::number(*f) : fallback;
}

// Python's round(x, n) on a float: correctly rounded, ties to even.
double round_half_even(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(n, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  int64_t precision = a.get_int(0, 0);
  std::string method = a.has(1) ? py_str(a.get(1)) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    raise(ErrorKind::Filter, "method must be common, ceil or floor");
  if (!v.is_number())
    raise(ErrorKind::Type, "type {} doesn't define __round__ method", v.type_name());
  if (method == "common") {
    if (v.kind() != Kind::Float) {
      if (precision >= 0) return Value::integer(v.as_int());
      return Value::integer(float_to_int(round_half_even(v.as_float(), precision)));
    }
    return Value::number(round_half_even(v.as_float(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

std::string html_unescape(const std::string& s) {
  static const std::pair<const char*, const char*> named[] = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\xC2\xA0"}};
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    size_t semi = s[i] == '&' ? s.find(';', i) : std::string::npos;
    if (semi == std::string::npos || semi - i > 10) {
      out.push_back(s[i]);
      continue;
    }
    std::string ent = s.substr(i + 1, semi - i - 1);
    std::string rep;
    if (!ent.empty() && ent[0] == '#') {
      bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      char* end = nullptr;
      unsigned long cp = std::strtoul(ent.c_str() + (hex ? 2 : 1), &end, hex ? 16 : 10);
      if (*end == '\0' && ent.size() > (hex ? 2u : 1u))
        unicode::append(rep, static_cast<char32_t>(cp));
    } else {
      for (const auto& [name, text] : named)
        if (ent == name) rep = text;
    }
    if (rep.empty()) {
      out.push_back(s[i]);
      continue;
    }
    out += rep;
    i = semi;
  }
  return out;
}

// Markup.striptags: drop comments, then tags, collapse whitespace, unescape entities.
Value f_striptags(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("striptags", args);
  std::string value = py_str(v);
  for (const auto& [open, close] :
       {std::pair<const char*, const char*>{"<!--", "-->"}, {"<", ">"}}) {
    size_t start;
    while ((start = value.find(open)) != std::string::npos) {
      size_t end = value.find(close, start);
      if (end == std::string::npos) break;
      value = value.substr(0, start) + value.substr(end + std::strlen(close));
    }
  }
  std::string joined;
  for (const std::string& w : pystr::split(value, std::nullopt, -1))
    joined += (joined.empty() ? "" : " ") + w;
  return Value::string(html_unescape(joined));
}

}  // namespace

const FilterTable& conversion_filters() {
  static const FilterTable table = {
      {"int", f_int},
      {"float", f_float},
      {"round", f_round},
      {"striptags", f_striptags},
  };
  return table;
}

}  // namespace tandem::jinja
