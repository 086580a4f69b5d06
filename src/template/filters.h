// jinja2's builtin filters (plus transformers' `tojson`), by name. Each follows the jinja2
// definition, including its quirks: `default` only replaces undefined unless boolean=true,
// `map`/`select`/`items` return one-shot generators, `indent` skips the first and blank lines,
// `join`/`replace` give plain strings while `trim`/`upper` keep Markup.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/value.h"

namespace tandem::jinja {

using FilterFn = Value (*)(Interpreter& in, const Value& input, CallArgs& args);

// nullptr for an unknown filter.
FilterFn find_filter(std::string_view name);

// The parts of the table: filters.cpp (text), filters_seq.cpp (sequences),
// filters_convert.cpp (int, float, round, striptags), filters_higher.cpp (map, select,
// reject, selectattr, rejectattr, batch, slice, groupby, random, attr).
using FilterTable = std::vector<std::pair<const char*, FilterFn>>;
const FilterTable& text_filters();
const FilterTable& sequence_filters();
const FilterTable& conversion_filters();
const FilterTable& higher_order_filters();

// markupsafe.soft_str: strings (Markup included) as they are, anything else str()'d.
Value soft_str(const Value& v);

// jinja2's make_attrgetter: "a.b.0" looked up item-first, digits as integers; an undefined
// result becomes `fallback` when one is given.
Value get_attribute_path(Interpreter& in, const Value& item, const Value& attribute,
                         const Value* fallback = nullptr);

}  // namespace tandem::jinja
