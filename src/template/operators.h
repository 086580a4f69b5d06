// Python's operators on template values: arithmetic (with str/list repetition and
// concatenation, Markup escaping), ordering, `in`. Undefined operands raise UndefinedError
// (or SecurityError for an unsafe attribute), as jinja2's Undefined does.
#pragma once

#include "template/ast.h"
#include "template/value.h"

namespace tandem::jinja {

Value binary_op(BinOp op, const Value& a, const Value& b);
Value negate(const Value& v, bool negative);  // unary - and +
bool compare(CmpOp op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// Python's a < b for sort keys; TypeError across unorderable types.
bool py_less(const Value& a, const Value& b);

// Python's int(f) for a float: its integer part, which must be finite and fit 64 bits
// (Python's ints are unbounded; ours are not): OverflowError otherwise.
int64_t float_to_int(double f);

// Raises the error stored in an undefined value (UndefinedError / SecurityError).
[[noreturn]] void fail_undefined(const Value& undefined);

}  // namespace tandem::jinja
