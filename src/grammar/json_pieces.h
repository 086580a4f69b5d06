// The building blocks of JSON text shared by the schema compiler: bounded whitespace,
// strings (their characters, with escapes), numbers, any value, and property keys. Rules
// that several places use (a string character, any value) are made once and called.
//
// Choices that make the output stricter than JSON, never looser:
// - whitespace between tokens is at most JsonOptions::max_whitespace characters;
// - numbers are bounded (numeric_range.h): integers within int64, at most 16 fraction and
//   an exponent of at most 288, so a row can always close a number;
// - a \u escape never names a surrogate (a character outside the BMP is written as raw
//   UTF-8), so every escape is one character and maxLength can count them;
// - characters of a `pattern` string are raw UTF-8 where JSON allows, escaped only where
//   JSON requires (\" \\ and control characters).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "grammar/codepoint_set.h"
#include "grammar/grammar_ir.h"
#include "grammar/regex.h"

namespace tandem::grammar {

struct JsonOptions {
  // The longest run of whitespace (space, \t, \n, \r) allowed wherever JSON allows
  // whitespace: 0 is compact JSON. Bounded, so that a schema with bounded sizes always ends.
  uint32_t max_whitespace = 0;
  // Objects with `properties` but no `additionalProperties` take no other properties (as
  // OpenAI's strict mode and xgrammar do); false: any other property, as JSON Schema reads it.
  bool strict_properties = true;
  // Arrays with `prefixItems` but no `items` take no more items (the same reading).
  bool strict_items = true;
};

class JsonPieces {
 public:
  JsonPieces(GrammarIr& ir, const JsonOptions& options) : ir_(ir), options_(options) {}

  ExprId ws();           // bounded whitespace
  ExprId punct(char c);  // c with whitespace allowed around it
  ExprId string_char();  // one JSON string character (a call)
  ExprId any_string();   // "..."
  ExprId string_of_length(uint32_t min, std::optional<uint32_t> max);
  // Bounded as numeric_range.h says (int64; 19.16 digits, an exponent up to 288). Rules, so
  // the numerals are laid out once however many places use them.
  ExprId any_integer();
  ExprId any_number();
  ExprId any_value();  // any JSON value (a recursive rule)
  ExprId any_object();
  ExprId any_array();
  // The JSON text of v (compact): for const and enum. Throws GrammarError at path for
  // strings that are not UTF-8.
  ExprId literal_value(const nlohmann::ordered_json& v, const std::string& path,
                       const std::string& keyword);
  // A key, as a JSON string whose content is not one of `names` (raw characters only: a
  // backslash escape could spell one of them).
  ExprId key_other_than(const std::vector<std::string>& names);
  // Maps a regex's code point sets to JSON string characters.
  CharEncoder string_encoder() const;

 private:
  RuleId value_rule();

  GrammarIr& ir_;
  JsonOptions options_;
  std::optional<ExprId> string_char_;
  std::optional<RuleId> value_rule_;
  std::optional<RuleId> integer_rule_, number_rule_;
};

// The raw (unescaped) characters a JSON string may hold.
CodepointSet json_raw_chars();

}  // namespace tandem::grammar
