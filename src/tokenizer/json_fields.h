// Reading tokenizer.json components: every error names the file, the component kind
// ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder", "added_tokens") and
// the offending field or type, e.g.
//   "/m/tokenizer.json: pre_tokenizer: unknown type 'UnicodeScripts' (supported: ...)".
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/error.h"

namespace tandem::tok {

using json = nlohmann::json;

// Where a component comes from, for error messages.
struct LoadContext {
  std::string file;       // the tokenizer.json path (or "<memory>")
  std::string component;  // "normalizer", "decoder", ...

  LoadContext with(std::string_view sub) const { return {file, std::string(sub)}; }

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    tandem::fail("{}: {}: {}", file, component, fmt::format(format, std::forward<Args>(args)...));
  }
};

// The "type" string of a component object.
inline std::string component_type(const json& j, const LoadContext& ctx) {
  if (!j.is_object()) ctx.fail("expected an object, got {}", j.type_name());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string())
    ctx.fail("missing \"type\" in {}", j.dump().substr(0, 200));
  return it->get<std::string>();
}

inline const json& require_field(const json& j, std::string_view key, const LoadContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) ctx.fail("missing field \"{}\"", key);
  return *it;
}

inline std::string require_string(const json& j, std::string_view key, const LoadContext& ctx) {
  const json& v = require_field(j, key, ctx);
  if (!v.is_string()) ctx.fail("field \"{}\" must be a string, got {}", key, v.type_name());
  return v.get<std::string>();
}

inline bool bool_field(const json& j, std::string_view key, bool fallback, const LoadContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) ctx.fail("field \"{}\" must be a boolean, got {}", key, it->type_name());
  return it->get<bool>();
}

inline int64_t int_field(const json& j, std::string_view key, int64_t fallback,
                         const LoadContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) ctx.fail("field \"{}\" must be an integer", key);
  return it->get<int64_t>();
}

// A field holding exactly one character (Metaspace "replacement", Strip "content").
char32_t char_field(const json& j, std::string_view key, const LoadContext& ctx);

}  // namespace tandem::tok
