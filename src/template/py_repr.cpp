#include "template/py_repr.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "template/errors.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

void append_hex_escape(std::string& out, char32_t c) {
  if (c < 0x100) {
    out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
  } else if (c < 0x10000) {
    out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
  } else {
    out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
  }
}

// Containers can nest arbitrarily deep (a template can build [[[...]]] in a loop); Python's
// repr stops with a RecursionError, and so do we instead of exhausting the stack.
struct DepthGuard {
  static constexpr int kMaxDepth = 512;
  static thread_local int depth;
  DepthGuard() {
    if (++depth > kMaxDepth) {
      depth = 0;
      raise(ErrorKind::Recursion,
            "maximum recursion depth exceeded while getting the repr of an object");
    }
  }
  ~DepthGuard() { depth = depth > 0 ? depth - 1 : 0; }
};
thread_local int DepthGuard::depth = 0;

std::string sequence_repr(const ValueList& items, const char* open, const char* close) {
  DepthGuard guard;
  std::string out = open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_charged(out, py_repr(items[i]));
  }
  return out + close;
}

std::string list_repr(const Value& v) {
  const ListData& l = v.as_list();
  switch (l.flavor) {
    case ListFlavor::Tuple:
    case ListFlavor::Group:
      if (l.items.size() == 1) return fmt::format("({},)", py_repr(l.items[0]));
      return sequence_repr(l.items, "(", ")");
    case ListFlavor::DictKeys:
      return fmt::format("dict_keys({})", sequence_repr(l.items, "[", "]"));
    case ListFlavor::DictValues:
      return fmt::format("dict_values({})", sequence_repr(l.items, "[", "]"));
    case ListFlavor::DictItems:
      return fmt::format("dict_items({})", sequence_repr(l.items, "[", "]"));
    case ListFlavor::Range:
      if (l.range_args[2] == 1)
        return fmt::format("range({}, {})", l.range_args[0], l.range_args[1]);
      return fmt::format("range({}, {}, {})", l.range_args[0], l.range_args[1], l.range_args[2]);
    default:
      return sequence_repr(l.items, "[", "]");
  }
}

std::string dict_repr(const DictData& d) {
  DepthGuard guard;
  std::string out = "{";
  for (size_t i = 0; i < d.entries.size(); ++i) {
    if (i) out += ", ";
    append_charged(out, py_repr(d.entries[i].first) + ": " + py_repr(d.entries[i].second));
  }
  return out + "}";
}

}  // namespace

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // shortest round-trip: "-1.2345e+05"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  int decpt = exponent + 1;                   // value = 0.digits * 10^decpt
  if (decpt <= -4 || decpt > 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) mant.append(".").append(digits, 1);
    return sign + mant + fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  if (decpt <= 0) return sign + "0." + std::string(-decpt, '0') + digits;
  if (static_cast<size_t>(decpt) >= digits.size())
    return sign + digits + std::string(decpt - digits.size(), '0') + ".0";
  return sign + digits.substr(0, decpt) + "." + digits.substr(decpt);
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = unicode::next(s, pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      append_hex_escape(out, c);  // a lone surrogate, as Python shows it
    } else if (!unicode::is_printable(c)) {
      append_hex_escape(out, c);
    } else {
      unicode::append(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return v.as_string();
    default:
      return py_repr(v);
  }
}

std::string py_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.as_int());
    case Kind::Float:
      return float_repr(v.as_float());
    case Kind::String:
      return v.is_safe() ? fmt::format("Markup({})", string_repr(v.as_string()))
                         : string_repr(v.as_string());
    case Kind::List:
      return list_repr(v);
    case Kind::Dict:
      return dict_repr(v.as_dict());
    case Kind::Iterator:
      return fmt::format("<generator object {}>", v.as_iterator().origin);
    case Kind::Callable:
      return v.as_callable().repr;
    case Kind::Object:
      return v.as_object().repr();
  }
  return "";
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value escape_value(const Value& v) {
  if (v.is_string() && v.is_safe()) return v;
  return Value::string(html_escape(py_str(v)), true);
}

}  // namespace tandem::jinja
