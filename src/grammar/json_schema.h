// JSON Schema (drafts 4 to 2020-12, the part that denotes a context-free language) compiled
// to a grammar whose every output is JSON that validates against the schema.
//
// Enforced exactly:
//   type (one or a list; absent: inferred from the other keywords, or any value)
//   properties, required, additionalProperties (false, true or a schema)
//   enum, const                       any JSON values, with `type` beside them
//   anyOf; oneOf when its alternatives provably exclude one another (different types,
//     disjoint const/enum values, or a required property with disjoint const/enum values)
//   allOf, and keywords beside $ref/anyOf/oneOf, when their keywords merge (a keyword set
//     on two sides must agree, or be one whose intersection is known: type, required,
//     properties, enum, min*/max*, items)
//   $ref to "#" or a JSON pointer inside the document ($defs, definitions, ...), recursive
//   items, prefixItems (and the draft-4 tuple form of items with additionalItems)
//   minItems, maxItems, minLength, maxLength (in characters, as ajv counts them)
//   pattern (regex.h: the ECMAScript subset), unanchored as JSON Schema reads it
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (number or draft-4 boolean):
//     exact for integers (a digit automaton for the range); for numbers exact in decimal,
//     with bounded numbers written without an exponent
//   format: date, time, date-time, uuid, email (string_formats.h)
// Stricter than the schema, never looser (every output still validates):
//   properties come in the schema's order, declared ones before additional ones;
//   additional property keys are written without backslash escapes;
//   `properties` without `additionalProperties` means no others (JsonOptions);
//   integers are written as integers, numbers without redundant forms ("-0" never);
//   whitespace is bounded (compact by default).
// Refused with a GrammarError naming the keyword and its JSON pointer: not, if/then/else,
// patternProperties, propertyNames, dependent*, min/maxProperties, uniqueItems: true,
// contains, unevaluated*, multipleOf, $dynamicRef, remote $refs, other formats, pattern
// together with format, minLength/maxLength beside a pattern or format unless every string
// of the pattern or format already has a length inside them (^[0-9]{5}$ with maxLength 5),
// and any schema or regex that is malformed.
// Annotations (title, description, default, examples, $comment, ...) and unknown keywords
// are ignored, as validators ignore them.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "grammar/grammar_ir.h"
#include "grammar/json_pieces.h"

namespace tandem::grammar {

// Compiles schema into ir and makes it the root. Throws GrammarError.
void compile_json_schema(GrammarIr& ir, const nlohmann::ordered_json& schema,
                         const JsonOptions& options);

}  // namespace tandem::grammar
