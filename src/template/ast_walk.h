// Generic traversal of expression trees: each direct sub-expression of a node, in jinja2's
// field order (so analyses that care about evaluation order see the same order).
#pragma once

#include <functional>

#include "template/ast.h"

namespace tandem::jinja {

void for_each_child(const Expr& e, const std::function<void(const Expr&)>& fn);

}  // namespace tandem::jinja
