// Python's string formatting: `"%s" % x` (printf style, also the `format` filter) and
// `"{}".format(x)` with the format-spec mini-language. Markup format strings escape their
// arguments, as markupsafe does.
#pragma once

#include <functional>
#include <string>

#include "template/value.h"

namespace tandem::jinja {

// fmt % args: args is a tuple (positional), a dict (%(name)s) or a single value.
Value percent_format(const Value& fmt, const Value& args);

// format(value, spec): the mini-language [[fill]align][sign][#][0][width][,_][.prec][type].
std::string format_value(const Value& v, const std::string& spec);

// fmt.format(*args, **kwargs). `resolve` looks up field attributes/items ({0.name}, {x[k]})
// through the sandbox: (obj, key, is_attr) -> value.
using FieldResolver = std::function<Value(const Value&, const Value&, bool)>;
Value str_format(const Value& fmt, const CallArgs& args, const FieldResolver& resolve);

}  // namespace tandem::jinja
