// Python methods of the builtin types a template can reach as attributes (`s.strip()`,
// `d.items()`, `l.index(x)`), with the immutable sandbox's rule: methods that mutate a
// list/dict/set exist but are unsafe to touch (SecurityError when called).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "template/value.h"

namespace tandem::jinja {

enum class MethodSafety { Missing, Safe, Unsafe };

// Whether `obj` has a Python attribute `name` that is a method, and whether it is safe.
MethodSafety method_safety(const Value& obj, std::string_view name);

// The Python attribute `name` of obj (a bound method, a number's `real`, an object's
// attribute), an unsafe undefined for forbidden ones, or nullopt when there is none.
std::optional<Value> python_attribute(const Value& obj, const std::string& name);

// Calls a safe method (method_safety(...) == Safe).
Value call_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args);

// Per-type implementations (str_methods.cpp, container_methods.cpp).
bool is_str_method(std::string_view name);
Value call_str_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args);
Value call_container_method(Interpreter& in, const Value& self, const std::string& name,
                            CallArgs& args);

// "dict object", "None", "jinja2.utils.Namespace object": jinja2's object_type_repr.
std::string object_type_repr(const Value& v);

// Python's slice semantics on str (by code point), list, tuple and range.
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace tandem::jinja
