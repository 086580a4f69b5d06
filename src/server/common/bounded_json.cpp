#include "server/common/bounded_json.h"

#include <fmt/format.h>

namespace tandem::server {
namespace {

// Counts values and nesting; never stores anything.
class LimitCheck {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit LimitCheck(const JsonLimits& limits) : limits_(limits) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(number_integer_t) { return value(); }
  bool number_unsigned(number_unsigned_t) { return value(); }
  bool number_float(number_float_t, const string_t&) { return value(); }
  bool string(string_t&) { return value(); }
  bool binary(binary_t&) { return value(); }
  bool key(string_t&) { return true; }
  bool start_object(size_t) { return open(); }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    refuse(JsonRefusal::Malformed, e.what());
    return false;
  }

  const std::optional<JsonParse>& refused() const { return refused_; }

 private:
  bool value() {
    if (++num_values_ <= limits_.max_values) return true;
    refuse(JsonRefusal::TooManyValues,
           fmt::format("it holds more than {} values (--max-json-values)", limits_.max_values));
    return false;
  }
  bool open() {
    if (!value()) return false;
    if (++depth_ <= limits_.max_depth) return true;
    refuse(JsonRefusal::TooDeep,
           fmt::format("it nests deeper than {} levels (--max-json-depth)", limits_.max_depth));
    return false;
  }
  bool close() {
    --depth_;
    return true;
  }
  void refuse(JsonRefusal why, std::string message) {
    if (refused_) return;
    refused_ = JsonParse{std::nullopt, why, std::move(message)};
  }

  const JsonLimits& limits_;
  size_t num_values_ = 0;
  int depth_ = 0;
  std::optional<JsonParse> refused_;
};

}  // namespace

JsonParse parse_bounded_json(std::string_view text, const JsonLimits& limits) {
  // nlohmann's lexer reads a NUL byte as the end of the input, so "{}\0garbage" would
  // parse; JSON text never holds one raw (inside strings it is escaped as \u0000).
  if (size_t nul = text.find('\0'); nul != std::string_view::npos)
    return JsonParse{std::nullopt, JsonRefusal::Malformed,
                     fmt::format("it holds a NUL byte at offset {}", nul)};
  LimitCheck check(limits);
  bool ok = Json::sax_parse(text, &check);
  if (!ok || check.refused()) {
    if (check.refused()) return *check.refused();
    return JsonParse{std::nullopt, JsonRefusal::Malformed, "it is not valid JSON"};
  }
  JsonParse out;
  try {
    out.value = Json::parse(text);
  } catch (const Json::exception& e) {  // not expected: the SAX pass accepted the same text
    out.message = e.what();
  }
  return out;
}

}  // namespace tandem::server
