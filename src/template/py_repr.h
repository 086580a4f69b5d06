// Python's str() and repr() of template values: what `{{ x }}` prints.
// True/False/None, floats as repr (1.0, 1e-05, 1e+16), containers as their repr
// (['a', 'b'], {'a': 1}, ('x',)).
#pragma once

#include <string>

#include "template/value.h"

namespace tandem::jinja {

std::string py_str(const Value& v);             // str(v); undefined -> ""
std::string py_repr(const Value& v);            // repr(v)
std::string float_repr(double f);               // repr(float): shortest round-trip, Python layout
std::string string_repr(const std::string& s);  // repr(str), quotes chosen like Python
// markupsafe.escape: & < > ' " -> entities.
std::string html_escape(const std::string& s);
// markupsafe.escape(v): Markup stays as is, anything else is str()'d and escaped.
Value escape_value(const Value& v);

}  // namespace tandem::jinja
