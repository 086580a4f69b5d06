// Python str methods as templates call them (`s.strip()`, `s.split(',', 1)`, `'{}'.format(x)`).
// On a Markup string, string arguments are escaped and results stay Markup, as markupsafe does.
#include <algorithm>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/interpreter.h"
#include "template/methods.h"
#include "template/py_format.h"
#include "template/py_repr.h"
#include "template/str_ops.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

constexpr const char* kStrMethods[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill",
};

// Context of one call: the receiver and whether it is Markup.
struct StrCall {
  Interpreter& in;
  const Value& self;
  const std::string& s;
  bool markup;

  Value str(std::string v) const { return Value::string(std::move(v), markup); }
  // A string argument, as is.
  std::string arg_text(const Value& v, const char*) const {
    if (!v.is_string()) raise(ErrorKind::Type, "must be str, not {}", v.type_name());
    return v.as_string();
  }
  // A string argument that Markup escapes (replace's new text, fill characters).
  std::string escaped_text(const Value& v, const char* fn) const {
    std::string t = arg_text(v, fn);
    return markup && !v.is_safe() ? html_escape(t) : t;
  }
  std::optional<std::string> opt_text(const BoundArgs& a, size_t i, const char* fn) const {
    if (!a.has(i) || a.get(i).is_none()) return std::nullopt;
    return arg_text(a.get(i), fn);
  }
  Value list_of(const std::vector<std::string>& parts) const {
    ValueList items;
    for (const auto& p : parts) items.push_back(str(p));
    return Value::list(std::move(items));
  }
};

std::optional<int64_t> opt_int(const BoundArgs& a, size_t i) {
  if (!a.has(i) || a.get(i).is_none()) return std::nullopt;
  return a.get_int(i, 0);
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred, bool empty_result) {
  if (s.empty()) return Value::boolean(empty_result);
  for (size_t pos = 0; pos < s.size();)
    if (!pred(unicode::next(s, pos))) return Value::boolean(false);
  return Value::boolean(true);
}

Value case_predicate(const std::string& s, bool want_upper) {
  bool any_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = unicode::next(s, pos);
    if (unicode::is_upper(c)) {
      if (!want_upper) return Value::boolean(false);
      any_cased = true;
    } else if (unicode::is_lower(c)) {
      if (want_upper) return Value::boolean(false);
      any_cased = true;
    }
  }
  return Value::boolean(any_cased);
}

std::optional<Value> predicate_method(const StrCall& c, const std::string& name) {
  const std::string& s = c.s;
  if (name == "isalnum") return all_chars(s, unicode::is_alnum, false);
  if (name == "isalpha") return all_chars(s, unicode::is_alpha, false);
  if (name == "isascii")
    return all_chars(
        s, [](char32_t ch) { return ch < 0x80; }, true);
  if (name == "isdecimal" || name == "isdigit" || name == "isnumeric")
    return all_chars(s, unicode::is_digit, false);
  if (name == "isspace") return all_chars(s, unicode::is_space, false);
  if (name == "isprintable") return all_chars(s, unicode::is_printable, true);
  if (name == "isupper") return case_predicate(s, true);
  if (name == "islower") return case_predicate(s, false);
  if (name == "isidentifier") {
    if (s.empty() || unicode::is_digit(unicode::decode(s)[0])) return Value::boolean(false);
    return all_chars(s, unicode::is_word, false);
  }
  if (name == "istitle") {
    bool prev_cased = false, any = false;
    for (size_t pos = 0; pos < s.size();) {
      char32_t ch = unicode::next(s, pos);
      bool upper = unicode::is_upper(ch), lower = unicode::is_lower(ch);
      if ((upper && prev_cased) || (lower && !prev_cased)) return Value::boolean(false);
      prev_cased = upper || lower;
      any = any || prev_cased;
    }
    return Value::boolean(any);
  }
  return std::nullopt;
}

Value affix_test(const StrCall& c, const std::string& name, CallArgs& args) {
  BoundArgs a(name, args, {"prefix", "start", "end"}, 1);
  pystr::Span sp =
      pystr::adjust_span(opt_int(a, 1), opt_int(a, 2), static_cast<int64_t>(unicode::length(c.s)));
  std::string hay = pystr::substr(c.s, sp.start, sp.end);
  ValueList options;
  if (a.get(0).is_list() && a.get(0).flavor() == ListFlavor::Tuple) {
    options = a.get(0).as_list().items;
  } else if (a.get(0).is_string()) {
    options.push_back(a.get(0));
  } else {
    raise(ErrorKind::Type, "{} first arg must be str or a tuple of str, not {}", name,
          a.get(0).type_name());
  }
  bool starts = name == "startswith";
  for (const Value& o : options) {
    std::string p = c.arg_text(o, name.c_str());
    if (sp.start > sp.end) continue;
    bool hit = starts
                   ? hay.compare(0, p.size(), p) == 0
                   : hay.size() >= p.size() && hay.compare(hay.size() - p.size(), p.size(), p) == 0;
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value search_method(const StrCall& c, const std::string& name, CallArgs& args) {
  BoundArgs a(name, args, {"sub", "start", "end"}, 1);
  std::string sub = c.arg_text(a.get(0), name.c_str());
  if (name == "count") return Value::integer(pystr::count(c.s, sub, opt_int(a, 1), opt_int(a, 2)));
  bool reverse = name == "rfind" || name == "rindex";
  int64_t i = pystr::find(c.s, sub, opt_int(a, 1), opt_int(a, 2), reverse);
  if (i < 0 && (name == "index" || name == "rindex"))
    raise(ErrorKind::Value, "substring not found");
  return Value::integer(i);
}

Value join_method(const StrCall& c, CallArgs& args) {
  BoundArgs a("join", args, {"iterable"}, 1);
  std::string out;
  size_t i = 0;
  for (const Value& item : a.get(0).iterate()) {
    if (!item.is_string())
      raise(ErrorKind::Type, "sequence item {}: expected str instance, {} found", i,
            item.type_name());
    if (i++) append_charged(out, c.s);
    append_charged(out,
                   c.markup && !item.is_safe() ? html_escape(item.as_string()) : item.as_string());
  }
  return c.str(std::move(out));
}

Value partition_method(const StrCall& c, const std::string& name, CallArgs& args) {
  BoundArgs a(name, args, {"sep"}, 1);
  std::string sep = c.arg_text(a.get(0), name.c_str());
  if (sep.empty()) raise(ErrorKind::Value, "empty separator");
  size_t hit = name == "partition" ? c.s.find(sep) : c.s.rfind(sep);
  if (hit == std::string::npos) {
    return name == "partition" ? Value::tuple({c.str(c.s), c.str(""), c.str("")})
                               : Value::tuple({c.str(""), c.str(""), c.str(c.s)});
  }
  return Value::tuple({c.str(c.s.substr(0, hit)), c.str(sep), c.str(c.s.substr(hit + sep.size()))});
}

Value format_method(const StrCall& c, CallArgs& args) {
  Interpreter& in = c.in;
  FieldResolver resolve = [&in](const Value& obj, const Value& key, bool is_attr) {
    return is_attr ? in.getattr(obj, key.as_string()) : in.getitem(obj, key);
  };
  return str_format(c.self, args, resolve);
}

Value pad_method(const StrCall& c, const std::string& name, CallArgs& args) {
  BoundArgs a(name, args, {"width", "fillchar"}, 1);
  char32_t fill = ' ';
  if (a.has(1)) {
    std::u32string f = unicode::decode(c.escaped_text(a.get(1), name.c_str()));
    if (f.size() != 1)
      raise(ErrorKind::Type, "The fill character must be exactly one character long");
    fill = f[0];
  }
  char align = name == "ljust" ? '<' : name == "rjust" ? '>' : '^';
  return c.str(pystr::pad(c.s, a.get_int(0, 0), fill, align));
}

std::string expand_tabs(const std::string& s, int64_t tab) {
  int64_t col = 0;
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    char32_t ch = unicode::next(s, pos);
    if (ch == '\t') {
      int64_t n = tab > 0 ? tab - col % tab : 0;
      charge_render(size_t(n));
      out += std::string(n, ' ');
      col += n;
    } else {
      unicode::append(out, ch);
      col = (ch == '\n' || ch == '\r') ? 0 : col + 1;
    }
  }
  return out;
}

std::optional<Value> strip_split_method(const StrCall& c, const std::string& name, CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(name, args, {"chars"});
    return c.str(
        pystr::strip(c.s, c.opt_text(a, 0, name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs a(name, args, {"sep", "maxsplit"});
    auto sep = c.opt_text(a, 0, name.c_str());
    int64_t maxsplit = a.get_int(1, -1);
    return c.list_of(name == "split" ? pystr::split(c.s, sep, maxsplit)
                                     : pystr::rsplit(c.s, sep, maxsplit));
  }
  if (name == "splitlines") {
    BoundArgs a(name, args, {"keepends"});
    return c.list_of(pystr::splitlines(c.s, a.get_bool(0, false)));
  }
  return std::nullopt;
}

Value transform_method(const StrCall& c, const std::string& name, CallArgs& args) {
  if (auto v = strip_split_method(c, name, args)) return *v;
  if (name == "replace") {
    BoundArgs a(name, args, {"old", "new", "count"}, 2);
    return c.str(pystr::replace(c.s, c.arg_text(a.get(0), "replace"),
                                c.escaped_text(a.get(1), "replace"), a.get_int(2, -1)));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(name, args, {"affix"}, 1);
    std::string x = c.arg_text(a.get(0), name.c_str());
    bool prefix = name == "removeprefix";
    if (prefix && c.s.compare(0, x.size(), x) == 0) return c.str(c.s.substr(x.size()));
    if (!prefix && c.s.size() >= x.size() && c.s.compare(c.s.size() - x.size(), x.size(), x) == 0)
      return c.str(c.s.substr(0, c.s.size() - x.size()));
    return c.str(c.s);
  }
  if (name == "zfill") {
    BoundArgs a(name, args, {"width"}, 1);
    return c.str(pystr::zfill(c.s, a.get_int(0, 0)));
  }
  if (name == "expandtabs") {
    BoundArgs a(name, args, {"tabsize"});
    return c.str(expand_tabs(c.s, a.get_int(0, 8)));
  }
  expect_no_args(name, args);
  if (name == "upper") return c.str(unicode::upper(c.s));
  if (name == "lower" || name == "casefold") return c.str(unicode::lower(c.s));
  if (name == "title") return c.str(pystr::title(c.s));
  if (name == "capitalize") return c.str(pystr::capitalize(c.s));
  if (name == "swapcase") return c.str(pystr::swapcase(c.s));
  raise(ErrorKind::Type, "str.{}() is not supported in templates", name);
}

}  // namespace

bool is_str_method(std::string_view name) {
  return std::any_of(std::begin(kStrMethods), std::end(kStrMethods),
                     [&](const char* m) { return name == m; });
}

Value call_str_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  StrCall c{in, self, self.as_string(), self.is_safe()};
  if (name.rfind("is", 0) == 0) {
    expect_no_args(name, args);
    if (auto v = predicate_method(c, name)) return *v;
  }
  if (name == "startswith" || name == "endswith") return affix_test(c, name, args);
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count")
    return search_method(c, name, args);
  if (name == "join") return join_method(c, args);
  if (name == "partition" || name == "rpartition") return partition_method(c, name, args);
  if (name == "format") return format_method(c, args);
  if (name == "format_map") {
    BoundArgs a(name, args, {"mapping"}, 1);
    CallArgs named;
    if (!a.get(0).is_dict()) raise(ErrorKind::Type, "format_map() argument must be a mapping");
    for (const auto& [k, v] : a.get(0).as_dict().entries)
      if (k.is_string()) named.named.emplace_back(k.as_string(), v);
    return format_method(c, named);
  }
  if (name == "center" || name == "ljust" || name == "rjust") return pad_method(c, name, args);
  return transform_method(c, name, args);
}

}  // namespace tandem::jinja
