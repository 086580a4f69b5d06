#include "template/json_dump.h"

#include <algorithm>
#include <cmath>

#include "template/errors.h"
#include "template/py_repr.h"
#include "template/unicode.h"
#include "template/render_budget.h"

namespace tandem::jinja {
namespace {

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void write(const Value& v, int depth) {
    if (depth > 512)
      raise(ErrorKind::Recursion, "maximum recursion depth exceeded while encoding a JSON object");
    switch (v.kind()) {
      case Kind::None:
        out_ += "null";
        return;
      case Kind::Bool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        out_ += std::to_string(v.as_int());
        return;
      case Kind::Float:
        out_ += float_text(v.as_float());
        return;
      case Kind::String:
        write_string(v.as_string());
        return;
      case Kind::List:
        if (v.flavor() == ListFlavor::List || v.flavor() == ListFlavor::Tuple ||
            v.flavor() == ListFlavor::Group) {
          write_array(v.as_list().items, depth);
          return;
        }
        break;  // range and dict views are not JSON serializable
      case Kind::Dict:
        write_object(v.as_dict(), depth);
        return;
      default:
        break;
    }
    raise(ErrorKind::Type, "Object of type {} is not JSON serializable", v.type_name());
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string float_text(double f) {
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
    return float_repr(f);
  }

  void newline(int depth) {
    if (!o_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < depth; ++i) append_charged(out_, *o_.indent);
  }

  void write_string(const std::string& s) {
    charge_render(s.size());
    out_.push_back('"');
    for (size_t pos = 0; pos < s.size();) {
      char32_t c = unicode::next(s, pos);
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        default:
          if (c < 0x20 || (o_.ensure_ascii && c >= 0x7F)) {
            write_u_escape(c);
          } else {
            unicode::append(out_, c);
          }
      }
    }
    out_.push_back('"');
  }

  void write_u_escape(char32_t c) {
    if (c >= 0x10000) {
      char32_t v = c - 0x10000;
      out_ += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    }
  }

  void write_array(const ValueList& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_sep_;
      newline(depth + 1);
      write(items[i], depth + 1);
    }
    newline(depth);
    out_.push_back(']');
  }

  // Keys: str as is; int/float/bool/None become their JSON text; others are an error.
  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String:
        return k.as_string();
      case Kind::Int:
        return std::to_string(k.as_int());
      case Kind::Float:
        return float_text(k.as_float());
      case Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Kind::None:
        return "null";
      default:
        raise(ErrorKind::Type, "keys must be str, int, float, bool or None, not {}", k.type_name());
    }
  }

  void write_object(const DictData& d, int depth) {
    if (d.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> items;
    for (const auto& [k, v] : d.entries) items.emplace_back(key_text(k), &v);
    if (o_.sort_keys)
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    out_.push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_sep_;
      newline(depth + 1);
      write_string(items[i].first);
      out_ += key_sep_;
      write(*items[i].second, depth + 1);
    }
    newline(depth);
    out_.push_back('}');
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  JsonWriter w(options);
  w.write(v, 0);
  return w.take();
}

}  // namespace tandem::jinja
