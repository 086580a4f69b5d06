// jinja2's per-frame symbol analysis (idtracking.py), reduced to the one decision that
// changes what a template renders here.
//
// jinja2 compiles every frame (the template root, a loop body, a macro, a set/filter/with
// block) to Python locals. A name whose first reference in a frame is an unconditional
// assignment, and that no enclosing frame references, starts that frame as *undefined* --
// even when the render context has it -- until the assignment runs. Nested frames that read
// it before then see undefined:
//   {% for m in ms %}{{ x }}{% endfor %}{% set x = 1 %}   -> the loop prints "" for x
// Every other name is looked up through the enclosing scopes and then the context, which is
// what the interpreter's scope chain does. analyze_symbols records the undefined-at-entry
// names on each frame-owning node (`declared`); the interpreter binds them on entry.
#pragma once

#include "template/ast.h"

namespace tandem::jinja {

void analyze_symbols(Program& program);

}  // namespace tandem::jinja
