// GBNF, llama.cpp's grammar format (its `grammar` request field), compiled to the IR:
//   root ::= "{" ws pair ("," ws pair)* "}"      # comments run to the end of the line
//   pair ::= [a-z]+ ":" ws [0-9]{1,3}
//   ws   ::= [ \t\n]{0,4}
// Rules `name ::= alternatives`, names of letters, digits, '-' and '_'; the output must
// match `root`. Terminals are code points: "literals", [classes] with ranges and [^negation],
// `.` (any character); escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. Grouping
// ( ), alternation |, repetition * + ? {m} {m,} {m,n}. A rule continues onto the next line
// only inside parentheses or after '|' or '::=' (as in llama.cpp). Token references
// (<[id]>, <name>) are refused, and so are left-recursive rules.
#pragma once

#include <string_view>

#include "grammar/grammar_ir.h"

namespace tandem::grammar {

// Parses text into ir, whose root becomes `root`. Throws GrammarError with the line and
// column of the problem as its path.
void compile_gbnf(GrammarIr& ir, std::string_view text);

}  // namespace tandem::grammar
