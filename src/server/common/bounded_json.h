// JSON from clients, parsed in time and memory linear in its size, with its nesting and its
// number of values bounded before anything is built.
//
// Two passes: a SAX pass that builds nothing and stops at the first value past a limit (or
// the first syntax error, or a number out of double's range such as 1e400), then
// nlohmann's ordinary DOM parse, which only ever sees text that is known to be within the
// limits. (nlohmann's callback parse, which could check depth while building, costs
// O(n²) in the number of objects.) Bounded depth is what makes every later recursive walk
// of the value safe: copies, dumps, the template's conversion.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/common/json_text.h"
#include "server/common/server_limits.h"

namespace tandem::server {

enum class JsonRefusal : uint8_t {
  Malformed,      // not JSON (including numbers out of range)
  TooDeep,        // nests deeper than JsonLimits::max_depth
  TooManyValues,  // more than JsonLimits::max_values values
};

struct JsonParse {
  std::optional<Json> value;  // set on success
  JsonRefusal refusal = JsonRefusal::Malformed;
  std::string message;  // why, when refused: names the limit (and its flag)
};

JsonParse parse_bounded_json(std::string_view text, const JsonLimits& limits);

}  // namespace tandem::server
