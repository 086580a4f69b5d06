// Exact numeric bounds as digit automata. A JSON Schema `minimum`/`maximum` becomes the
// language of canonical numerals inside the range (no leading zeros, no "-0"), built digit
// by digit the way one writes a regex for 0..255: a range of same-length numerals splits
// at its first differing digit into a low edge, a free middle and a high edge.
//
// Numbers with bounds are written without an exponent, so their value is exactly the
// decimal text; integers never have a fraction or exponent. Bounds are decimals taken from
// the schema's JSON (a double bound is its shortest round-trip form: 0.1 is "0.1").
//
// Every number is bounded, even where the schema sets no bound (issue 43), as llama.cpp's
// schema converter bounds them: otherwise a row may write digits until max_tokens and end
// with `length` on a schema nothing else stops. So a JSON parser can hold every number a
// grammar allows, and every constrained output can close with `stop`:
// - an integer lies in int64's range, unless the schema's own bound on the other side is
//   wider (then numerals as long as that bound);
// - a number's integer part has at most 19 digits (int64's width; again unless the other
//   bound is wider), its fraction at most 16 digits (more only where a bound of the schema
//   has that many), its exponent 3 digits at most 288 (no leading zeros), so the value is
//   a finite double (< 1e19 · 1e288): parsers that refuse an overflow (nlohmann's) read it.
#pragma once

#include <compare>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "grammar/grammar_ir.h"

namespace tandem::grammar {

// A decimal number: canonical digits (int_digits without leading zeros, "0" for zero;
// frac_digits without trailing zeros); zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;

  bool is_integer() const { return frac_digits.empty(); }
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  std::string to_string() const;
};

std::strong_ordering operator<=>(const Decimal& a, const Decimal& b);
inline bool operator==(const Decimal& a, const Decimal& b) {
  return (a <=> b) == 0;
}

// From a JSON number (nullopt for anything else).
std::optional<Decimal> decimal_from_json(const nlohmann::ordered_json& v);
// From numeral text: [-]digits[.digits][(e|E)[+-]digits]; nullopt if malformed.
std::optional<Decimal> parse_decimal(std::string_view text);

Decimal decimal_floor(const Decimal& d);
Decimal decimal_ceil(const Decimal& d);
Decimal decimal_negate(const Decimal& d);
Decimal integer_add(const Decimal& d, int delta);  // d an integer, delta ±1

struct Bound {
  Decimal value;
  bool exclusive = false;
};

constexpr size_t kMaxIntegerDigits = 19;   // a number's integer part, without a bound
constexpr size_t kMaxFractionDigits = 16;  // a number's fraction
constexpr uint32_t kMaxExponent = 288;      // a number's exponent's magnitude (unbounded numbers)

Decimal int64_min();
Decimal int64_max();

// Canonical integer numerals n with lo <= n <= hi; a missing bound is int64's (or, when
// the other bound lies beyond int64, the widest numeral of that bound's length).
ExprId integer_range(GrammarIr& ir, const std::optional<Decimal>& lo,
                     const std::optional<Decimal>& hi);

// Canonical decimal numerals (-?int(.digits)?, no exponent) inside the bounds; a missing
// bound leaves the integer part its 19 digits (or the other bound's length, if longer).
ExprId number_range(GrammarIr& ir, const std::optional<Bound>& lo, const std::optional<Bound>& hi);

// Any JSON number within the limits above: -?(0|[1-9][0-9]{0,18})(.[0-9]{1,16})?
// ([eE][+-]?(0..288))?
ExprId any_json_number(GrammarIr& ir);

}  // namespace tandem::grammar
