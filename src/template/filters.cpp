// Text and scalar filters; the registry. Sequence filters are in filters_seq.cpp.
#include "template/filters.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/json_dump.h"
#include "template/operators.h"
#include "template/py_format.h"
#include "template/py_repr.h"
#include "template/str_ops.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja {

Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(py_str(v));
}

namespace {

// Result of a str method applied through soft_str: Markup in, Markup out.
Value same_flavor(const Value& s, std::string text) {
  return Value::string(std::move(text), s.is_safe());
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("default", args, {"default_value", "boolean"});
  if (v.is_undefined() || (a.get_bool(1, false) && !v.truthy()))
    return a.get_or(0, Value::string(""));
  return v;
}

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("length", args);
  switch (v.kind()) {
    case Kind::Undefined:
      return Value::integer(0);
    case Kind::String:
      return Value::integer(static_cast<int64_t>(unicode::length(v.as_string())));
    case Kind::List:
      return Value::integer(static_cast<int64_t>(v.as_list().items.size()));
    case Kind::Dict:
      return Value::integer(static_cast<int64_t>(v.as_dict().entries.size()));
    default:
      raise(ErrorKind::Type, "object of type '{}' has no len()", v.type_name());
  }
}

Value f_string(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("string", args);
  return soft_str(v);
}

Value f_safe(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("safe", args);
  return v.is_string() && v.is_safe() ? v : Value::string(py_str(v), true);
}

Value f_escape(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("escape", args);
  return escape_value(v);
}

Value f_forceescape(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("forceescape", args);
  return Value::string(html_escape(py_str(v)), true);
}

Value f_upper(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("upper", args);
  Value s = soft_str(v);
  return same_flavor(s, unicode::upper(s.as_string()));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("lower", args);
  Value s = soft_str(v);
  return same_flavor(s, unicode::lower(s.as_string()));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("capitalize", args);
  Value s = soft_str(v);
  return same_flavor(s, pystr::capitalize(s.as_string()));
}

// Words start after runs of [-\s({\[<]; each word: first char upper, rest lower.
Value f_title(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("title", args);
  std::u32string u = unicode::decode(py_str(v));
  auto is_break = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::u32string out;
  bool word_start = true;
  for (char32_t c : u) {
    if (is_break(c)) {
      out.push_back(c);
      word_start = true;
    } else {
      out.push_back(word_start ? unicode::to_upper(c) : unicode::to_lower(c));
      word_start = false;
    }
  }
  return Value::string(unicode::encode(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("trim", args, {"chars"});
  Value s = soft_str(v);
  std::optional<std::string> chars = a.get_str(0);
  return same_flavor(s, pystr::strip(s.as_string(), chars, true, true));
}

Value f_replace(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("replace", args, {"old", "new", "count"}, 2);
  return Value::string(
      pystr::replace(py_str(v), py_str(a.get(0)), py_str(a.get(1)), a.get_int(2, -1)));
}

Value f_center(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("center", args, {"width"});
  Value s = soft_str(v);
  return same_flavor(s, pystr::pad(s.as_string(), a.get_int(0, 80), ' ', '^'));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("indent", args, {"width", "first", "blank"});
  if (!(a.has(0) && a.get(0).is_string())) charge_render(size_t(a.get_int(0, 4)));
  std::string indention =
      a.has(0) && a.get(0).is_string() ? a.get(0).as_string() : std::string(a.get_int(0, 4), ' ');
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_list() && v.flavor() == ListFlavor::List)  // list += "\n" works, then .splitlines fails
    raise(ErrorKind::Attribute, "'list' object has no attribute 'splitlines'");
  if (!v.is_string())
    raise(ErrorKind::Type, "unsupported operand type(s) for +=: '{}' and 'str'", v.type_name());
  std::vector<std::string> lines = pystr::splitlines(v.as_string() + "\n", false);
  std::string rv;
  if (a.get_bool(2, false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) append_charged(rv, "\n" + indention);
      append_charged(rv, lines[i]);
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) append_charged(rv, indention + lines[i]);
    }
  }
  if (a.get_bool(1, false)) rv = indention + rv;
  return same_flavor(v, std::move(rv));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("truncate", args, {"length", "killwords", "end", "leeway"});
  int64_t length = a.get_int(0, 255), leeway = a.get_int(3, 5);
  std::string end = a.has(2) ? py_str(a.get(2)) : "...";
  int64_t end_len = static_cast<int64_t>(unicode::length(end));
  if (length < end_len) raise(ErrorKind::Runtime, "expected length >= {}, got {}", end_len, length);
  if (!v.is_string()) raise(ErrorKind::Type, "object of type '{}' has no len()", v.type_name());
  const std::string& s = v.as_string();
  if (static_cast<int64_t>(unicode::length(s)) <= length + leeway) return v;
  std::string head = pystr::substr(s, 0, length - end_len);
  if (a.get_bool(1, false)) return same_flavor(v, head + end);
  return same_flavor(v, pystr::rsplit(head, std::string(" "), 1)[0] + end);
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("wordcount", args);
  int64_t n = 0;
  bool in_word = false;
  std::string s = py_str(v);
  for (size_t pos = 0; pos < s.size();) {
    bool w = unicode::is_word(unicode::next(s, pos));
    n += w && !in_word;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.named.empty())
    raise(ErrorKind::Filter, "can't handle positional and keyword arguments at the same time");
  Value fmt_value = soft_str(v);
  if (!args.named.empty()) {
    DictData d;
    for (const auto& [k, val] : args.named) d.set(Value::string(k), val);
    return percent_format(fmt_value, Value::dict(std::move(d)));
  }
  return percent_format(fmt_value, Value::tuple(args.positional));
}

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("abs", args);
  if (v.kind() == Kind::Float) return Value::number(std::fabs(v.as_float()));
  if (v.is_number()) return Value::integer(std::llabs(v.as_int()));
  raise(ErrorKind::Type, "bad operand type for abs(): '{}'", v.type_name());
}

// transformers: json.dumps(x, ensure_ascii=False, indent=indent, separators=..., sort_keys=False)
Value f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.get_bool(0, false);
  o.sort_keys = a.get_bool(3, false);
  if (a.has(1) && !a.get(1).is_none()) {
    const Value& ind = a.get(1);
    if (!ind.is_string()) charge_render(size_t(std::max<int64_t>(a.get_int(1, 0), 0)));
    o.indent =
        ind.is_string() ? ind.as_string() : std::string(std::max<int64_t>(a.get_int(1, 0), 0), ' ');
  }
  if (a.has(2) && !a.get(2).is_none()) {
    ValueList seps = a.get(2).iterate();
    if (seps.size() != 2) raise(ErrorKind::Value, "separators must be an (item, key) pair");
    o.item_separator = py_str(seps[0]);
    o.key_separator = py_str(seps[1]);
  }
  return Value::string(json_dumps(v, o));
}

std::string url_quote(const std::string& s, bool for_qs) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (!for_qs && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else if (for_qs && c == ' ') {
      out.push_back('+');
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

Value f_urlencode(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("urlencode", args);
  if (v.is_string() || !(v.is_list() || v.is_dict() || v.kind() == Kind::Iterator))
    return Value::string(url_quote(py_str(v), false));
  std::string out;
  ValueList pairs;
  if (v.is_dict()) {
    for (const auto& [k, val] : v.as_dict().entries) pairs.push_back(Value::tuple({k, val}));
  } else {
    pairs = v.iterate();
  }
  for (const Value& p : pairs) {
    ValueList kv = p.iterate();
    if (kv.size() != 2) raise(ErrorKind::Value, "urlencode expects (key, value) pairs");
    if (!out.empty()) out += "&";
    out += url_quote(py_str(kv[0]), true) + "=" + url_quote(py_str(kv[1]), true);
  }
  return Value::string(std::move(out));
}

Value f_filesizeformat(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("filesizeformat", args, {"binary"});
  bool binary = a.get_bool(0, false);
  double bytes = v.as_float();
  if (v.is_string()) {
    char* end = nullptr;
    bytes = std::strtod(v.as_string().c_str(), &end);
    if (v.as_string().empty() || *end != '\0')
      raise(ErrorKind::Value, "could not convert string to float: {}", string_repr(v.as_string()));
  } else if (!v.is_number()) {
    raise(ErrorKind::Type, "float() argument must be a string or a real number, not '{}'",
          v.type_name());
  }
  double base = binary ? 1024 : 1000;
  static const char* dec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* bin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value::string("1 Byte");
  if (bytes < base) return Value::string(fmt::format("{} Bytes", static_cast<int64_t>(bytes)));
  double unit = base;
  for (int i = 0; i < 8; ++i) {
    unit = std::pow(base, i + 2);
    if (bytes < unit || i == 7)
      return Value::string(fmt::format("{:.1f} {}", base * bytes / unit, binary ? bin[i] : dec[i]));
  }
  return Value::string("");
}

Value f_pprint(Interpreter&, const Value& v, CallArgs& args) {
  expect_no_args("pprint", args);
  return Value::string(py_repr(v));
}

Value f_xmlattr(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("xmlattr", args, {"autospace"});
  if (!v.is_dict()) raise(ErrorKind::Type, "xmlattr expects a mapping");
  std::string rv;
  for (const auto& [k, val] : v.as_dict().entries) {
    if (val.is_none() || val.is_undefined()) continue;
    std::string key = py_str(k);
    if (key.find_first_of(" \t\n\r\f/>=") != std::string::npos)
      raise(ErrorKind::Value, "Invalid character in attribute name: {}", string_repr(key));
    if (!rv.empty()) rv += ' ';
    rv += fmt::format("{}=\"{}\"", html_escape(key), html_escape(py_str(val)));
  }
  if (a.get_bool(0, true) && !rv.empty()) rv = " " + rv;
  return Value::string(std::move(rv));
}

}  // namespace

const FilterTable& text_filters() {
  static const FilterTable table = {
      {"abs", f_abs},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"e", f_escape},
      {"escape", f_escape},
      {"filesizeformat", f_filesizeformat},
      {"forceescape", f_forceescape},
      {"format", f_format},
      {"indent", f_indent},
      {"length", f_length},
      {"lower", f_lower},
      {"pprint", f_pprint},
      {"replace", f_replace},
      {"safe", f_safe},
      {"string", f_string},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"upper", f_upper},
      {"urlencode", f_urlencode},
      {"wordcount", f_wordcount},
      {"xmlattr", f_xmlattr},
  };
  return table;
}

FilterFn find_filter(std::string_view name) {
  static const std::map<std::string, FilterFn, std::less<>> all = [] {
    std::map<std::string, FilterFn, std::less<>> m;
    for (const auto& [n, f] : text_filters()) m.emplace(n, f);
    for (const auto& [n, f] : sequence_filters()) m.emplace(n, f);
    for (const auto& [n, f] : conversion_filters()) m.emplace(n, f);
    for (const auto& [n, f] : higher_order_filters()) m.emplace(n, f);
    return m;
  }();
  auto it = all.find(name);
  return it == all.end() ? nullptr : it->second;
}

}  // namespace tandem::jinja
