// Binds a call's positional and keyword arguments to a Python-style parameter list, with
// Python's TypeErrors for too many, unknown, duplicate or missing arguments.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "template/value.h"

namespace tandem::jinja {

class BoundArgs {
 public:
  // The first `required` params must be given.
  BoundArgs(std::string_view fn, const CallArgs& args, std::initializer_list<const char*> params,
            size_t required = 0);

  bool has(size_t i) const { return slots_[i].has_value(); }
  // The argument, or undefined when not given.
  const Value& get(size_t i) const { return slots_[i] ? *slots_[i] : missing_; }
  Value get_or(size_t i, Value fallback) const { return slots_[i] ? *slots_[i] : fallback; }
  // Typed accessors with Python's TypeError for the wrong type.
  int64_t get_int(size_t i, int64_t fallback) const;
  bool get_bool(size_t i, bool fallback) const;  // truthiness
  std::optional<std::string> get_str(size_t i) const;

 private:
  std::string fn_;
  std::vector<std::optional<Value>> slots_;
  Value missing_;
};

// Rejects any argument: for zero-parameter methods like str.upper().
void expect_no_args(std::string_view fn, const CallArgs& args);

}  // namespace tandem::jinja
