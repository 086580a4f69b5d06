#include "schema_checker.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace tandem::grammar::test {

namespace {

using Json = nlohmann::ordered_json;

// Code points, as ajv counts string length.
size_t num_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_leap(int y) {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

bool valid_date(const std::string& s) {
  static const std::regex re("^(\\d{4})-(\\d{2})-(\\d{2})$");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1) return false;
  return d <= days[mo - 1] + (mo == 2 && is_leap(y) ? 1 : 0);
}

bool valid_time(const std::string& s) {
  static const std::regex re("^(\\d{2}):(\\d{2}):(\\d{2})(\\.\\d+)?(z|Z|[+-](\\d{2}):(\\d{2}))$");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (std::stoi(m[1]) > 23 || std::stoi(m[2]) > 59 || std::stoi(m[3]) > 59) return false;
  if (m[6].matched && (std::stoi(m[6]) > 23 || std::stoi(m[7]) > 59)) return false;
  return true;
}

bool valid_format(const std::string& format, const std::string& s) {
  if (format == "date") return valid_date(s);
  if (format == "time") return valid_time(s);
  if (format == "date-time") {
    size_t t = s.find_first_of("Tt");
    return t != std::string::npos && valid_date(s.substr(0, t)) && valid_time(s.substr(t + 1));
  }
  if (format == "uuid") {
    static const std::regex re("^(urn:uuid:)?[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$",
                               std::regex::icase);
    return std::regex_match(s, re);
  }
  if (format == "email") {  // ajv-formats' full email regex
    static const std::regex re(
        "^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
        "([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)+[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
        std::regex::icase);
    return std::regex_match(s, re);
  }
  return false;
}

// JSON equality: objects compare as unordered maps, numbers by value (1 == 1.0).
bool same_value(const Json& a, const Json& b) {
  return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
}

class Checker {
 public:
  explicit Checker(const Json& root) : root_(root) {}

  bool valid(const Json& s, const Json& v, int depth = 0) const {
    if (depth > 200) return false;
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref") && !valid(resolve(s["$ref"].get<std::string>()), v, depth + 1))
      return false;
    if (s.contains("allOf"))
      for (const Json& sub : s["allOf"])
        if (!valid(sub, v, depth + 1)) return false;
    if (s.contains("anyOf")) {
      bool any = false;
      for (const Json& sub : s["anyOf"]) any = any || valid(sub, v, depth + 1);
      if (!any) return false;
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const Json& sub : s["oneOf"]) n += valid(sub, v, depth + 1);
      if (n != 1) return false;
    }
    if (s.contains("const") && !same_value(s["const"], v)) return false;
    if (s.contains("enum") && std::none_of(s["enum"].begin(), s["enum"].end(),
                                           [&](const Json& e) { return same_value(e, v); }))
      return false;
    if (s.contains("type") && !has_type(s["type"], v)) return false;
    if (v.is_object()) return valid_object(s, v, depth);
    if (v.is_array()) return valid_array(s, v, depth);
    if (v.is_string()) return valid_string(s, v.get<std::string>());
    if (v.is_number()) return valid_number(s, v);
    return true;
  }

 private:
  static bool has_type(const Json& t, const Json& v) {
    if (t.is_array()) {
      for (const Json& x : t)
        if (has_type(x, v)) return true;
      return false;
    }
    std::string n = t.get<std::string>();
    if (n == "null") return v.is_null();
    if (n == "boolean") return v.is_boolean();
    if (n == "string") return v.is_string();
    if (n == "array") return v.is_array();
    if (n == "object") return v.is_object();
    if (n == "number") return v.is_number();
    if (n == "integer")
      return v.is_number_integer() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    return false;
  }

  const Json& resolve(const std::string& ref) const {
    const Json* node = &root_;
    size_t pos = 1;
    while (pos < ref.size()) {
      size_t end = ref.find('/', pos + 1);
      size_t stop = end == std::string::npos ? ref.size() : end;
      std::string token;
      for (size_t i = pos + 1; i < stop; ++i) {
        bool escape = ref[i] == '~' && i + 1 < stop;
        token.push_back(escape ? (ref[i + 1] == '1' ? '/' : '~') : ref[i]);
        i += escape;
      }
      node = node->is_array() ? &(*node)[std::stoul(token)] : &(*node)[token];
      pos = end == std::string::npos ? ref.size() : end;
    }
    return *node;
  }

  bool valid_object(const Json& s, const Json& v, int depth) const {
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [key, value] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(key)) {
        if (!valid(s["properties"][key], value, depth + 1)) return false;
      } else if (s.contains("additionalProperties") &&
                 !valid(s["additionalProperties"], value, depth + 1)) {
        return false;
      }
    }
    return true;
  }

  bool valid_array(const Json& s, const Json& v, int depth) const {
    size_t n = v.size();
    if (s.contains("minItems") && n < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && n > s["maxItems"].get<size_t>()) return false;
    size_t k = 0;
    if (s.contains("prefixItems")) {
      const Json& prefix = s["prefixItems"];
      for (; k < prefix.size() && k < n; ++k)
        if (!valid(prefix[k], v[k], depth + 1)) return false;
      k = prefix.size();
    }
    if (s.contains("items")) {
      if (s["items"].is_array()) {  // draft-4 tuple form
        const Json& prefix = s["items"];
        for (k = 0; k < prefix.size() && k < n; ++k)
          if (!valid(prefix[k], v[k], depth + 1)) return false;
        k = prefix.size();
        if (s.contains("additionalItems"))
          for (size_t i = k; i < n; ++i)
            if (!valid(s["additionalItems"], v[i], depth + 1)) return false;
      } else {
        for (size_t i = k; i < n; ++i)
          if (!valid(s["items"], v[i], depth + 1)) return false;
      }
    }
    return true;
  }

  static bool valid_string(const Json& s, const std::string& v) {
    if (s.contains("minLength") && num_chars(v) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && num_chars(v) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") &&
        !std::regex_search(v, std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript)))
      return false;
    if (s.contains("format") && !valid_format(s["format"].get<std::string>(), v)) return false;
    return true;
  }

  static bool valid_number(const Json& s, const Json& v) {
    long double x = v.get<long double>();
    auto num = [&](const char* k) { return s[k].get<long double>(); };
    if (s.contains("minimum") && x < num("minimum")) return false;
    if (s.contains("maximum") && x > num("maximum")) return false;
    if (s.contains("exclusiveMinimum")) {
      if (s["exclusiveMinimum"].is_boolean()) {
        if (s["exclusiveMinimum"].get<bool>() && x <= num("minimum")) return false;
      } else if (x <= num("exclusiveMinimum")) {
        return false;
      }
    }
    if (s.contains("exclusiveMaximum")) {
      if (s["exclusiveMaximum"].is_boolean()) {
        if (s["exclusiveMaximum"].get<bool>() && x >= num("maximum")) return false;
      } else if (x >= num("exclusiveMaximum")) {
        return false;
      }
    }
    return true;
  }

  const Json& root_;
};

}  // namespace

bool schema_valid(const Json& schema, const Json& value) {
  return Checker(schema).valid(schema, value);
}

bool schema_valid_text(const Json& schema, const std::string& text) {
  Json v = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return false;
  return schema_valid(schema, v);
}

}  // namespace tandem::grammar::test
