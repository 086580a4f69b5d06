// Python's json.dumps as transformers' `tojson` filter calls it:
//   json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False)
// With separators unset: (", ", ": ") without indent, (",", ": ") with one.
// Insertion order of dicts is kept; floats print as Python's repr; tuples become arrays.
#pragma once

#include <optional>
#include <string>

#include "template/value.h"

namespace tandem::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // per-level indent text; unset: single line
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// Throws TypeError ("Object of type X is not JSON serializable") for undefined, callables...
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace tandem::jinja
