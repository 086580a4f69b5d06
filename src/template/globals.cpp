#include "template/globals.h"

#include <ctime>
#include <map>

#include "template/call_args.h"
#include "template/errors.h"
#include "template/interpreter.h"
#include "template/objects.h"
#include "template/py_repr.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

int64_t range_arg(const Value& v) {
  if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
    raise(ErrorKind::Type, "'{}' object cannot be interpreted as an integer", v.type_name());
  return v.as_int();
}

Value builtin_range(Interpreter&, CallArgs& args) {
  if (!args.named.empty()) raise(ErrorKind::Type, "range() takes no keyword arguments");
  const ValueList& p = args.positional;
  if (p.empty() || p.size() > 3)
    raise(ErrorKind::Type, "range expected at most 3 arguments, got {}", p.size());
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = range_arg(p[0]);
  } else {
    start = range_arg(p[0]);
    stop = range_arg(p[1]);
    if (p.size() == 3) step = range_arg(p[2]);
  }
  if (step == 0) raise(ErrorKind::Value, "range() arg 3 must not be zero");
  int64_t len = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                         : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (len > kMaxRange)
    raise(ErrorKind::Overflow,
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  return Value::range(start, stop, step);
}

Value builtin_dict(Interpreter&, CallArgs& args) {
  return Value::dict(build_dict(args));
}

Value builtin_namespace(Interpreter& in, CallArgs& args) {
  return in.track(Value::object(std::make_shared<NamespaceObject>(build_dict(args))));
}

Value builtin_cycler(Interpreter& in, CallArgs& args) {
  if (args.positional.empty()) raise(ErrorKind::Runtime, "at least one item has to be provided");
  return in.track(Value::object(std::make_shared<CyclerObject>(args.positional)));
}

Value builtin_joiner(Interpreter&, CallArgs& args) {
  BoundArgs a("joiner", args, {"sep"});
  return make_joiner(a.has(0) ? py_str(a.get(0)) : ", ");
}

Value builtin_raise_exception(Interpreter&, CallArgs& args) {
  BoundArgs a("raise_exception", args, {"message"}, 1);
  raise(ErrorKind::Raised, py_str(a.get(0)));
}

// "2026-11-29T12:00:00" (date-only and a trailing fraction/zone are accepted) -> tm.
std::tm parse_iso(const std::string& iso) {
  std::tm tm{};
  int y = 0, mo = 1, d = 1, h = 0, mi = 0, s = 0;
  int n = std::sscanf(iso.c_str(), "%d-%d-%d%*c%d:%d:%d", &y, &mo, &d, &h, &mi, &s);
  if (n < 3) raise(ErrorKind::Value, "strftime_now: invalid time '{}' (expected ISO 8601)", iso);
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  std::time_t t = timegm(&tm);  // normalizes and fills weekday / day of year
  gmtime_r(&t, &tm);
  return tm;
}

Value builtin_strftime_now(Interpreter& in, CallArgs& args) {
  BoundArgs a("strftime_now", args, {"format"}, 1);
  std::string format = py_str(a.get(0));
  std::tm tm{};
  if (in.options().now) {
    tm = parse_iso(*in.options().now);
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  charge_render(256 + saturating_product(format.size(), 8));
  std::string buf(256 + format.size() * 8, '\0');
  size_t n = format.empty() ? 0 : std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
  buf.resize(n);
  return Value::string(std::move(buf));
}

const std::map<std::string, Value, std::less<>>& globals() {
  static const std::map<std::string, Value, std::less<>> table = [] {
    std::map<std::string, Value, std::less<>> t;
    auto add = [&](const char* name, NativeFn fn, const char* repr) {
      t.emplace(name, Value::callable(name, std::move(fn), repr));
    };
    add("range", builtin_range, "<function safe_range>");
    add("dict", builtin_dict, "<class 'dict'>");
    add("namespace", builtin_namespace, "<class 'jinja2.utils.Namespace'>");
    add("cycler", builtin_cycler, "<class 'jinja2.utils.Cycler'>");
    add("joiner", builtin_joiner, "<class 'jinja2.utils.Joiner'>");
    add("raise_exception", builtin_raise_exception, "<function raise_exception>");
    add("strftime_now", builtin_strftime_now, "<function strftime_now>");
    return t;
  }();
  return table;
}

}  // namespace

const Value* find_global(std::string_view name) {
  const auto& table = globals();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

DictData build_dict(const CallArgs& args) {
  if (args.positional.size() > 1)
    raise(ErrorKind::Type, "dict expected at most 1 argument, got {}", args.positional.size());
  DictData d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else if (src.kind() == Kind::Object) {
      raise(ErrorKind::Type, "'{}' object is not iterable", src.type_name());
    } else {
      size_t i = 0;
      for (const Value& pair : src.iterate()) {
        ValueList kv = pair.is_list() || pair.is_string() || pair.kind() == Kind::Iterator
                           ? pair.iterate()
                           : ValueList{};
        if (kv.size() != 2)
          raise(ErrorKind::Value,
                "dictionary update sequence element #{} has length {}; 2 is required", i,
                kv.size());
        d.set(kv[0], kv[1]);
        ++i;
      }
    }
  }
  for (const auto& [k, v] : args.named) d.set(Value::string(k), v);
  return d;
}

}  // namespace tandem::jinja
