// Exact numeric bounds as digit automata. A JSON Schema `minimum`/`maximum` becomes the
// language of canonical numerals inside the range (no leading zeros, no "-0"), built digit
// by digit the way one writes a regex for 0..255: a range of same-length numerals splits
// at its first differing digit into a low edge, a free middle and a high edge.
//
// Numbers with bounds are written without an exponent, so their value is exactly the
// decimal text; integers never have a fraction or exponent. Bounds are decimals taken from
// the schema's JSON (a double bound is its shortest round-trip form: 0.1 is "0.1").
#pragma once

#include <compare>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

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

// Canonical integer numerals n with lo <= n <= hi (a missing bound is open).
ExprId integer_range(GrammarIr& ir, const std::optional<Decimal>& lo,
                     const std::optional<Decimal>& hi);

// Canonical decimal numerals (-?int(.digits)?, no exponent) inside the bounds.
ExprId number_range(GrammarIr& ir, const std::optional<Bound>& lo, const std::optional<Bound>& hi);

}  // namespace tandem::grammar
