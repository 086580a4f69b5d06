// The global functions a chat template can call: jinja2's defaults (range, dict, namespace,
// cycler, joiner) under the sandbox's range limit, plus transformers' raise_exception and
// strftime_now. Render context variables of the same name shadow these.
#pragma once

#include <string_view>

#include "template/value.h"

namespace tandem::jinja {

// nullptr when `name` is not a global.
const Value* find_global(std::string_view name);

// dict(*args, **kwargs) as Python builds it (also namespace()'s initializer).
DictData build_dict(const CallArgs& args);

}  // namespace tandem::jinja
