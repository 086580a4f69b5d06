// Regular expressions, the subset of ECMAScript (JSON Schema's `pattern` dialect, with the
// `u` flag) that denotes a regular language, compiled to grammar expressions:
//   literals; `.` (any character but \n \r U+2028 U+2029); classes `[a-z]`, `[^...]` with
//   ranges and the escapes below; `\d \D \w \W \s \S`; `\n \r \t \f \v \0 \xHH \uHHHH
//   \u{H...}` and identity escapes of punctuation; groups `(...)`, `(?:...)`,
//   `(?<name>...)`; alternation `|`; quantifiers `* + ? {n} {n,} {n,m}` (lazy `?` after one
//   is accepted: it changes which match a search finds, not which strings match); `^` at
//   the start and `$` at the end of a top-level alternative.
// Refused with an error naming the construct: backreferences, lookaround, `\b \B`,
// `\p{...}`, anchors elsewhere, flags. Repetition counts above 10,000 are refused.
//
// The regex denotes code points; an encoder turns each set of them into bytes: raw UTF-8
// for a `regex` spec, JSON string characters (escaped where JSON requires) for `pattern`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "grammar/codepoint_set.h"
#include "grammar/grammar_ir.h"

namespace tandem::grammar {

using CharEncoder = std::function<ExprId(GrammarIr&, const CodepointSet&)>;

struct RegexContext {
  CharEncoder encode;  // raw_utf8_encoder() or a JSON one
  // Unanchored search (JSON Schema `pattern`): an alternative without `^` may start
  // anywhere and one without `$` may end anywhere. Otherwise the regex must match whole.
  bool search = false;
  std::string path;     // for errors: where the regex sits
  std::string keyword;  // for errors: "pattern", "regex"
};

// How many characters the strings of a regex have.
struct RegexLength {
  uint64_t min = 0;
  std::optional<uint64_t> max;  // absent: unbounded
};

struct CompiledRegex {
  ExprId expr;
  RegexLength length;
};

// The regex as an expression (throws GrammarError with the offset of the bad part).
CompiledRegex compile_regex(GrammarIr& ir, std::string_view pattern, const RegexContext& ctx);

// Encodes a code point set as its UTF-8 bytes.
CharEncoder raw_utf8_encoder();

}  // namespace tandem::grammar
