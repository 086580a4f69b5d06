// `fmt % args` and `fmt.format(...)`: the parsing of format strings; the per-value
// formatting lives in py_format.cpp.
#include <cmath>
#include <cstdio>

#include "template/errors.h"
#include "template/operators.h"
#include "template/py_format.h"
#include "template/py_repr.h"
#include "template/render_budget.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

// One %-conversion's inputs.
struct Percent {
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

double real_arg(const Value& v, char type) {
  if (!v.is_number())
    raise(ErrorKind::Type, "%{} format: a real number is required, not {}", type, v.type_name());
  return v.as_float();
}

std::string apply_width(std::string body, const Percent& p) {
  size_t len = unicode::length(body);
  if (p.width < 0 || len >= static_cast<size_t>(p.width)) return body;
  size_t n = p.width - len;
  charge_render(n);
  if (p.flags.find('-') != std::string::npos) return body + std::string(n, ' ');
  bool zero = p.flags.find('0') != std::string::npos && p.type != 's' && p.type != 'r' &&
              p.type != 'a' && p.type != 'c';
  if (zero) {
    size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    return body.substr(0, sign) + std::string(n, '0') + body.substr(sign);
  }
  return std::string(n, ' ') + body;
}

bool has_flag(const Percent& p, char f) {
  return p.flags.find(f) != std::string::npos;
}

std::string signed_text(const Percent& p, bool negative, const std::string& digits) {
  return (negative ? "-" : has_flag(p, '+') ? "+" : has_flag(p, ' ') ? " " : "") + digits;
}

std::string percent_integer(const Percent& p, const Value& v) {
  if (p.type == 'd' || p.type == 'i' || p.type == 'u') {
    double f = real_arg(v, p.type);
    int64_t n = v.kind() == Kind::Float ? float_to_int(f) : v.as_int();
    const uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : uint64_t(n);
    return signed_text(p, n < 0, std::to_string(mag));
  }
  if (v.kind() == Kind::Float || !v.is_number())
    raise(ErrorKind::Type, "%{} format: an integer is required, not {}", p.type, v.type_name());
  int64_t n = v.as_int();
  uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : n;
  std::string digits = p.type == 'o'   ? fmt::format("{:o}", mag)
                       : p.type == 'x' ? fmt::format("{:x}", mag)
                                       : fmt::format("{:X}", mag);
  if (has_flag(p, '#')) digits = (p.type == 'o' ? "0o" : p.type == 'x' ? "0x" : "0X") + digits;
  return signed_text(p, n < 0, digits);
}

std::string percent_float(const Percent& p, const Value& v) {
  double f = real_arg(v, p.type);
  char buf[512];
  std::string cfmt = std::string("%") + (has_flag(p, '#') ? "#" : "") + ".*" + p.type;
  std::snprintf(buf, sizeof buf, cfmt.c_str(), p.precision < 0 ? 6 : p.precision, std::fabs(f));
  return signed_text(p, std::signbit(f), buf);
}

std::string convert_percent(const Percent& p, const Value& v, bool escape) {
  std::string body;
  switch (p.type) {
    case 's':
    case 'r':
    case 'a':
      body = p.type == 's' ? py_str(v) : py_repr(v);
      if (p.precision >= 0) body = unicode::encode(unicode::decode(body).substr(0, p.precision));
      if (escape && !(v.is_string() && v.is_safe())) body = html_escape(body);
      break;
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
      body = percent_integer(p, v);
      break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      body = percent_float(p, v);
      break;
    case 'c':
      if (v.is_string()) {
        body = v.as_string();
      } else {
        unicode::append(body, static_cast<char32_t>(v.as_int()));
      }
      break;
    default:
      raise(ErrorKind::Value, "unsupported format character '{}'", p.type);
  }
  return apply_width(std::move(body), p);
}

// Positional arguments of a %-format, consumed in order.
struct PercentArgs {
  ValueList items;
  size_t next = 0;
  const Value& take() {
    if (next >= items.size()) raise(ErrorKind::Type, "not enough arguments for format string");
    return items[next++];
  }
};

// One conversion spec after '%' (and after any "(key)"): flags, width, precision, type.
Percent parse_percent(const std::string& f, size_t& i, PercentArgs& args) {
  Percent p;
  auto number = [&](int& out) {
    if (i < f.size() && f[i] == '*') {
      out = static_cast<int>(args.take().as_int());
      ++i;
      return;
    }
    while (i < f.size() && f[i] >= '0' && f[i] <= '9') out = std::max(out, 0) * 10 + (f[i++] - '0');
  };
  while (i < f.size() && std::string("#0- +").find(f[i]) != std::string::npos)
    p.flags.push_back(f[i++]);
  number(p.width);
  if (i < f.size() && f[i] == '.') {
    ++i;
    p.precision = 0;
    number(p.precision);
  }
  while (i < f.size() && (f[i] == 'l' || f[i] == 'h' || f[i] == 'L')) ++i;
  if (i >= f.size()) raise(ErrorKind::Value, "incomplete format");
  p.type = f[i];
  return p;
}

}  // namespace

Value percent_format(const Value& fmt_value, const Value& args) {
  const std::string& f = fmt_value.as_string();
  bool is_tuple = args.is_list() && args.flavor() == ListFlavor::Tuple;
  PercentArgs positional{is_tuple ? args.as_list().items : ValueList{args}};
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.push_back(f[i]);
      continue;
    }
    if (++i >= f.size()) raise(ErrorKind::Value, "incomplete format");
    if (f[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* mapped = nullptr;
    if (f[i] == '(') {
      size_t close = f.find(')', i);
      if (close == std::string::npos) raise(ErrorKind::Value, "incomplete format key");
      if (args.is_undefined()) fail_undefined(args);
      if (!args.is_dict()) raise(ErrorKind::Type, "format requires a mapping");
      std::string key = f.substr(i + 1, close - i - 1);
      mapped = args.as_dict().find(std::string_view(key));
      if (!mapped) raise(ErrorKind::Key, "'{}'", key);
      used_mapping = true;
      i = close + 1;
    }
    Percent p = parse_percent(f, i, positional);
    append_charged(out,
                   convert_percent(p, mapped ? *mapped : positional.take(), fmt_value.is_safe()));
  }
  // Python skips this check for any non-tuple argument with __getitem__ (dict, list, ...).
  bool subscriptable = args.is_dict() || (args.is_list() && !is_tuple) || args.is_undefined();
  if (!used_mapping && !subscriptable && positional.next < positional.items.size())
    raise(ErrorKind::Type, "not all arguments converted during string formatting");
  return Value::string(std::move(out), fmt_value.is_safe());
}

namespace {

class BraceFormatter {
 public:
  BraceFormatter(const CallArgs& args, const FieldResolver& resolve, bool escape)
      : args_(args), resolve_(resolve), escape_(escape) {}

  std::string run(const std::string& f, int depth) {
    if (depth > 2) raise(ErrorKind::Value, "Max string recursion exceeded");
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
      char c = f[i];
      if (c == '}') {
        if (i + 1 < f.size() && f[i + 1] == '}') {
          out.push_back('}');
          ++i;
          continue;
        }
        raise(ErrorKind::Value, "Single '}' encountered in format string");
      }
      if (c != '{') {
        out.push_back(c);
        continue;
      }
      if (i + 1 < f.size() && f[i + 1] == '{') {
        out.push_back('{');
        ++i;
        continue;
      }
      size_t end = field_end(f, i + 1);
      append_charged(out, replace_field(f.substr(i + 1, end - i - 1), depth));
      i = end;
    }
    return out;
  }

 private:
  static size_t field_end(const std::string& f, size_t from) {
    int nest = 1;
    for (size_t j = from; j < f.size(); ++j) {
      if (f[j] == '{') ++nest;
      if (f[j] == '}' && --nest == 0) return j;
    }
    raise(ErrorKind::Value, "expected '}' before end of string");
  }

  std::string replace_field(const std::string& field, int depth) {
    size_t colon = std::string::npos, bang = std::string::npos;
    int bracket = 0;
    for (size_t j = 0; j < field.size(); ++j) {
      if (field[j] == '[') ++bracket;
      if (field[j] == ']') --bracket;
      if (bracket == 0 && field[j] == '!' && bang == std::string::npos) bang = j;
      if (bracket == 0 && field[j] == ':') {
        colon = j;
        break;
      }
    }
    size_t name_end = std::min(bang, colon);
    Value v = resolve_field(field.substr(0, name_end));
    if (bang != std::string::npos && bang < colon) {
      std::string conv =
          field.substr(bang + 1, (colon == std::string::npos ? field.size() : colon) - bang - 1);
      if (conv == "r" || conv == "a")
        v = Value::string(py_repr(v));
      else if (conv == "s")
        v = Value::string(py_str(v));
      else
        raise(ErrorKind::Value, "Unknown conversion specifier {}", conv);
    }
    std::string spec = colon == std::string::npos ? "" : run(field.substr(colon + 1), depth + 1);
    std::string text = format_value(v, spec);
    if (escape_ && !(v.is_string() && v.is_safe())) text = html_escape(text);
    return text;
  }

  Value resolve_field(const std::string& name) {
    size_t end = name.find_first_of(".[");
    std::string first = name.substr(0, end);
    Value v = first_value(first);
    while (end != std::string::npos && end < name.size()) {
      if (name[end] == '.') {
        size_t next = name.find_first_of(".[", end + 1);
        v = resolve_(v, Value::string(name.substr(end + 1, next - end - 1)), true);
        end = next;
      } else {
        size_t close = name.find(']', end);
        if (close == std::string::npos) raise(ErrorKind::Value, "Missing ']' in format string");
        std::string key = name.substr(end + 1, close - end - 1);
        bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = resolve_(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key), false);
        end = close + 1;
      }
    }
    return v;
  }

  Value first_value(const std::string& first) {
    if (first.empty()) {
      if (manual_)
        raise(ErrorKind::Value,
              "cannot switch from manual field specification to automatic field numbering");
      automatic_ = true;
      return positional(auto_index_++);
    }
    if (first.find_first_not_of("0123456789") == std::string::npos) {
      if (automatic_)
        raise(ErrorKind::Value,
              "cannot switch from automatic field numbering to manual field specification");
      manual_ = true;
      return positional(std::stoul(first));
    }
    for (const auto& [k, v] : args_.named)
      if (k == first) return v;
    raise(ErrorKind::Key, "'{}'", first);
  }

  const Value& positional(size_t i) {
    if (i >= args_.positional.size()) raise(ErrorKind::Index, "tuple index out of range");
    return args_.positional[i];
  }

  const CallArgs& args_;
  const FieldResolver& resolve_;
  bool escape_;
  bool automatic_ = false, manual_ = false;
  size_t auto_index_ = 0;
};

}  // namespace

Value str_format(const Value& fmt_value, const CallArgs& args, const FieldResolver& resolve) {
  BraceFormatter f(args, resolve, fmt_value.is_safe());
  return Value::string(f.run(fmt_value.as_string(), 0), fmt_value.is_safe());
}

}  // namespace tandem::jinja
