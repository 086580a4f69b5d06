// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, `x is sameas none`), by name.
// Named "predicates" to keep them apart from the unit tests.
#pragma once

#include <string_view>

#include "template/value.h"

namespace tandem::jinja {

using TestFn = bool (*)(Interpreter& in, const Value& input, CallArgs& args);

// nullptr for an unknown test.
TestFn find_test(std::string_view name);

}  // namespace tandem::jinja
