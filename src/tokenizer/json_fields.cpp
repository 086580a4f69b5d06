#include "tokenizer/json_fields.h"

#include "tokenizer/unicode.h"

namespace tandem::tok {

char32_t char_field(const json& j, std::string_view key, const LoadContext& ctx) {
  std::string s = require_string(j, key, ctx);
  size_t i = 0;
  char32_t c = s.empty() ? 0 : next_char(s, i);
  if (s.empty() || i != s.size()) ctx.fail("field \"{}\" must be one character, got '{}'", key, s);
  return c;
}

}  // namespace tandem::tok
