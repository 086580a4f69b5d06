#include "grammar/numeric_range.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace tandem::grammar {

namespace {

std::string strip_leading_zeros(std::string s) {
  size_t i = s.find_first_not_of('0');
  return i == std::string::npos ? "0" : s.substr(i);
}

std::string strip_trailing_zeros(std::string s) {
  size_t i = s.find_last_not_of('0');
  return i == std::string::npos ? "" : s.substr(0, i + 1);
}

Decimal make(bool negative, std::string int_digits, std::string frac_digits) {
  Decimal d{negative, strip_leading_zeros(std::move(int_digits)),
            strip_trailing_zeros(std::move(frac_digits))};
  if (d.is_zero()) d.negative = false;
  return d;
}

std::strong_ordering compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size())
    return a.int_digits.size() <=> b.int_digits.size();
  if (auto c = a.int_digits.compare(b.int_digits); c != 0) return c <=> 0;
  return a.frac_digits.compare(b.frac_digits) <=> 0;  // no trailing zeros: plain order works
}

std::string magnitude_add_one(std::string s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  s.insert(s.begin(), '1');
  return s;
}

std::string magnitude_sub_one(std::string s) {  // s > 0
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '0') {
      --s[i];
      return strip_leading_zeros(s);
    }
    s[i] = '9';
  }
  return "0";
}

ExprId digit(GrammarIr& ir) {
  return ir.byte_range('0', '9');
}

// Numerals of lo's length from lo to hi (same length, lo <= hi, no leading-zero rule here:
// callers pass ranges whose first digit is already right).
ExprId same_length(GrammarIr& ir, std::string_view lo, std::string_view hi) {
  if (lo.empty()) return ir.empty();
  if (lo[0] == hi[0])
    return ir.seq({ir.byte_range(uint8_t(lo[0]), uint8_t(lo[0])),
                   same_length(ir, lo.substr(1), hi.substr(1))});
  size_t rest = lo.size() - 1;
  bool lo_edge_free = lo.find_first_not_of('0', 1) == std::string_view::npos;
  bool hi_edge_free = hi.find_first_not_of('9', 1) == std::string_view::npos;
  char mid_lo = lo_edge_free ? lo[0] : char(lo[0] + 1);
  char mid_hi = hi_edge_free ? hi[0] : char(hi[0] - 1);
  std::vector<ExprId> parts;
  if (!lo_edge_free)
    parts.push_back(ir.seq({ir.byte_range(uint8_t(lo[0]), uint8_t(lo[0])),
                            same_length(ir, lo.substr(1), std::string(rest, '9'))}));
  if (mid_lo <= mid_hi)
    parts.push_back(ir.seq({ir.byte_range(uint8_t(mid_lo), uint8_t(mid_hi)),
                            ir.repeat(digit(ir), uint32_t(rest), uint32_t(rest))}));
  if (!hi_edge_free)
    parts.push_back(ir.seq({ir.byte_range(uint8_t(hi[0]), uint8_t(hi[0])),
                            same_length(ir, std::string(rest, '0'), hi.substr(1))}));
  return ir.alt(std::move(parts));
}

// Canonical numerals of the non-negative integers a..b (a <= b).
ExprId nonneg_range(GrammarIr& ir, const std::string& a, const std::string& b) {
  std::vector<ExprId> parts;
  size_t la = a.size();
  for (size_t len = la; len <= b.size(); ++len) {
    std::string lo = a;
    if (len != la) {  // the smallest numeral of len digits
      lo.assign(len, '0');
      lo[0] = '1';
    }
    std::string hi = len == b.size() ? b : std::string(len, '9');
    parts.push_back(same_length(ir, lo, hi));
  }
  return ir.alt(std::move(parts));
}

// The digits after a decimal point, as constrained by the edges of a range: the low edge
// needs 0.D >= 0.f (or >), the high edge 0.D <= 0.f (or <). Off an edge a side is free; a
// strict low edge whose digits ran out still needs a nonzero digit, a high edge whose
// digits ran out allows only zeros (or nothing, when strict).
enum class LowSide : uint8_t { Free, Tight, NeedNonzero };
enum class HighSide : uint8_t { Free, Tight, ZerosOnly, Impossible };

struct FracLanguage {
  bool empty_ok;  // no fraction at all
  ExprId digits;  // the non-empty digit strings allowed
};

class FracBuilder {
 public:
  // At most max_digits after the point; the edges' own digits must be fewer.
  FracBuilder(GrammarIr& ir, std::string lo, bool lo_strict, std::string hi, bool hi_strict,
              size_t max_digits)
      : ir_(ir),
        lo_(std::move(lo)),
        hi_(std::move(hi)),
        lo_strict_(lo_strict),
        hi_strict_(hi_strict),
        max_digits_(max_digits) {}

  // "" or "." digits, as allowed.
  ExprId fraction(LowSide lo, HighSide hi) {
    FracLanguage f = build(0, lo, hi);
    return ir_.alt(
        {f.empty_ok ? ir_.empty() : ir_.nothing(), ir_.seq({ir_.literal("."), f.digits})});
  }

 private:
  FracLanguage build(size_t k, LowSide lo, HighSide hi) {
    if (lo == LowSide::Tight && k >= lo_.size())
      lo = lo_strict_ ? LowSide::NeedNonzero : LowSide::Free;
    if (hi == HighSide::Tight && k >= hi_.size())
      hi = hi_strict_ ? HighSide::Impossible : HighSide::ZerosOnly;
    if (hi == HighSide::Impossible) return {false, ir_.nothing()};
    // k < max_digits_ while an edge is tight (the edges have fewer digits), so rest >= 1
    // there; off the edges rest may be 0, leaving only the empty fraction.
    const uint32_t rest = uint32_t(max_digits_ - k);
    if (lo != LowSide::Tight && hi != HighSide::Tight) {
      bool need_nonzero = lo == LowSide::NeedNonzero;
      if (rest == 0) return {!need_nonzero, ir_.nothing()};
      if (hi == HighSide::ZerosOnly)
        return {!need_nonzero, need_nonzero ? ir_.nothing() : ir_.repeat(ir_.literal("0"), 1, rest)};
      if (need_nonzero) return {false, some_nonzero(rest)};
      return {true, ir_.repeat(digit(ir_), 1, rest)};
    }
    bool empty_ok = lo == LowSide::Free;  // a tight high edge has a nonzero digit left
    std::vector<ExprId> options;
    int d = 0;
    while (d <= 9) {
      auto next = step(k, lo, hi, d);
      int e = d;
      while (e + 1 <= 9 && step(k, lo, hi, e + 1) == next) ++e;
      if (next) {
        FracLanguage rest = build(k + 1, next->first, next->second);
        ExprId suffix = ir_.alt({rest.empty_ok ? ir_.empty() : ir_.nothing(), rest.digits});
        options.push_back(ir_.seq({ir_.byte_range(uint8_t('0' + d), uint8_t('0' + e)), suffix}));
      }
      d = e + 1;
    }
    return {empty_ok, ir_.alt(std::move(options))};
  }

  // 1..rest digits, not all zeros: z zeros, a nonzero digit, then any digits up to rest.
  ExprId some_nonzero(uint32_t rest) {
    std::vector<ExprId> options;
    for (uint32_t z = 0; z < rest; ++z)
      options.push_back(ir_.seq({ir_.repeat(ir_.literal("0"), z, z), ir_.byte_range('1', '9'),
                                 ir_.repeat(digit(ir_), 0, rest - z - 1)}));
    return ir_.alt(std::move(options));
  }

  // The sides after digit d at position k, or nullopt when d leaves the range.
  std::optional<std::pair<LowSide, HighSide>> step(size_t k, LowSide lo, HighSide hi, int d) const {
    LowSide lo2 = lo;
    if (lo == LowSide::Tight) {
      int f = lo_[k] - '0';
      if (d < f) return std::nullopt;
      lo2 = d == f ? LowSide::Tight : LowSide::Free;
    } else if (lo == LowSide::NeedNonzero) {
      lo2 = d == 0 ? LowSide::NeedNonzero : LowSide::Free;
    }
    HighSide hi2 = hi;
    if (hi == HighSide::Tight) {
      int f = hi_[k] - '0';
      if (d > f) return std::nullopt;
      hi2 = d == f ? HighSide::Tight : HighSide::Free;
    } else if (hi == HighSide::ZerosOnly && d != 0) {
      return std::nullopt;
    }
    return std::make_pair(lo2, hi2);
  }

  GrammarIr& ir_;
  std::string lo_, hi_;
  bool lo_strict_, hi_strict_;
  size_t max_digits_;
};

// Non-negative decimal numerals y with lo <= y (< if exclusive) and y <= hi likewise, with
// at most max_frac fraction digits.
ExprId magnitude_range(GrammarIr& ir, const Bound& lo, const Bound& hi, size_t max_frac) {
  auto c = lo.value <=> hi.value;
  if (c > 0 || (c == 0 && (lo.exclusive || hi.exclusive))) return ir.nothing();
  const std::string& li = lo.value.int_digits;
  const std::string& hint = hi.value.int_digits;
  FracBuilder frac(ir, lo.value.frac_digits, lo.exclusive, hi.value.frac_digits, hi.exclusive,
                   max_frac);
  if (hint == li) return ir.seq({ir.literal(li), frac.fraction(LowSide::Tight, HighSide::Tight)});
  std::vector<ExprId> parts;
  parts.push_back(ir.seq({ir.literal(li), frac.fraction(LowSide::Tight, HighSide::Free)}));
  std::string mid_lo = magnitude_add_one(li);
  if (hint != "0") {
    std::string mid_hi = magnitude_sub_one(hint);
    if (make(false, mid_hi, "") >= make(false, mid_lo, ""))
      parts.push_back(ir.seq(
          {nonneg_range(ir, mid_lo, mid_hi), frac.fraction(LowSide::Free, HighSide::Free)}));
  }
  parts.push_back(ir.seq({ir.literal(hint), frac.fraction(LowSide::Free, HighSide::Tight)}));
  return ir.alt(std::move(parts));
}

Decimal power_of_ten(size_t zeros, bool negative) {
  std::string digits(zeros + 1, '0');
  digits[0] = '1';
  return make(negative, std::move(digits), "");
}

Decimal all_nines(size_t digits, bool negative) {
  return make(negative, std::string(digits, '9'), "");
}

// Digits of the integer part of a number with no bound on that side: int64's width, or the
// other bound's when it is wider (minimum 1e30 alone allows 31-digit numbers).
size_t open_side_digits(const std::optional<Decimal>& other) {
  return std::max(kMaxIntegerDigits, other ? other->int_digits.size() : 0);
}

}  // namespace

std::string Decimal::to_string() const {
  std::string s = negative ? "-" : "";
  s += int_digits;
  if (!frac_digits.empty()) s += "." + frac_digits;
  return s;
}

std::strong_ordering operator<=>(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative)
    return a.negative ? std::strong_ordering::less : std::strong_ordering::greater;
  auto c = compare_magnitude(a, b);
  return a.negative ? 0 <=> c : c;
}

std::optional<Decimal> parse_decimal(std::string_view text) {
  size_t p = 0;
  bool negative = p < text.size() && text[p] == '-';
  if (negative) ++p;
  auto digits = [&] {
    size_t start = p;
    while (p < text.size() && text[p] >= '0' && text[p] <= '9') ++p;
    return std::string(text.substr(start, p - start));
  };
  std::string int_part = digits();
  if (int_part.empty()) return std::nullopt;
  std::string frac_part;
  if (p < text.size() && text[p] == '.') {
    ++p;
    frac_part = digits();
    if (frac_part.empty()) return std::nullopt;
  }
  long exponent = 0;
  if (p < text.size() && (text[p] == 'e' || text[p] == 'E')) {
    ++p;
    bool exp_negative = p < text.size() && text[p] == '-';
    if (p < text.size() && (text[p] == '-' || text[p] == '+')) ++p;
    std::string e = digits();
    if (e.empty() || e.size() > 5) return std::nullopt;
    exponent = std::stol(e) * (exp_negative ? -1 : 1);
  }
  if (p != text.size()) return std::nullopt;
  // Move the decimal point by the exponent.
  std::string mantissa = int_part + frac_part;
  long point = long(int_part.size()) + exponent;
  if (point < 0) {
    mantissa.insert(0, size_t(-point), '0');
    point = 0;
  }
  if (size_t(point) > mantissa.size()) mantissa.append(size_t(point) - mantissa.size(), '0');
  return make(negative, mantissa.substr(0, size_t(point)), mantissa.substr(size_t(point)));
}

std::optional<Decimal> decimal_from_json(const nlohmann::ordered_json& v) {
  if (v.is_number_unsigned()) return parse_decimal(std::to_string(v.get<uint64_t>()));
  if (v.is_number_integer()) return parse_decimal(std::to_string(v.get<int64_t>()));
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d)) return std::nullopt;
    return parse_decimal(fmt::format("{}", d));
  }
  return std::nullopt;
}

Decimal decimal_negate(const Decimal& d) {
  return make(!d.negative, d.int_digits, d.frac_digits);
}

Decimal integer_add(const Decimal& d, int delta) {
  bool up = (delta > 0) != d.negative;  // does the magnitude grow?
  if (up) return make(d.negative, magnitude_add_one(d.int_digits), "");
  if (d.is_zero()) return make(true, "1", "");
  return make(d.negative, magnitude_sub_one(d.int_digits), "");
}

Decimal decimal_floor(const Decimal& d) {
  Decimal i = make(d.negative, d.int_digits, "");
  return d.is_integer() || !d.negative ? i : integer_add(i, -1);
}

Decimal decimal_ceil(const Decimal& d) {
  Decimal i = make(d.negative, d.int_digits, "");
  return d.is_integer() || d.negative ? i : integer_add(i, +1);
}

Decimal int64_min() {
  return make(true, "9223372036854775808", "");
}

Decimal int64_max() {
  return make(false, "9223372036854775807", "");
}

std::pair<Decimal, Decimal> closed_integer_bounds(const std::optional<Decimal>& lo,
                                                  const std::optional<Decimal>& hi) {
  Decimal l = lo ? *lo : int64_min(), h = hi ? *hi : int64_max();
  if (!hi && l > h) h = all_nines(l.int_digits.size(), false);
  if (!lo && l > h) l = all_nines(h.int_digits.size(), true);
  return {l, h};
}

ExprId integer_range(GrammarIr& ir, const std::optional<Decimal>& lo_bound,
                     const std::optional<Decimal>& hi_bound) {
  auto [lo, hi] = closed_integer_bounds(lo_bound, hi_bound);
  if (lo > hi) return ir.nothing();
  Decimal zero;
  std::vector<ExprId> parts;
  if (lo.negative) {  // negatives: magnitudes from max(1, -hi) to -lo
    std::string smallest = hi.negative ? hi.int_digits : "1";
    parts.push_back(ir.seq({ir.literal("-"), nonneg_range(ir, smallest, lo.int_digits)}));
  }
  if (hi >= zero) {
    std::string smallest = lo.negative ? "0" : lo.int_digits;
    parts.push_back(nonneg_range(ir, smallest, hi.int_digits));
  }
  return ir.alt(std::move(parts));
}

ExprId number_range(GrammarIr& ir, const std::optional<Bound>& lo_bound,
                    const std::optional<Bound>& hi_bound) {
  std::optional<Decimal> lo_value, hi_value;
  if (lo_bound) lo_value = lo_bound->value;
  if (hi_bound) hi_value = hi_bound->value;
  // An open side: fewer than open_side_digits() integer digits.
  Bound lo = lo_bound ? *lo_bound : Bound{power_of_ten(open_side_digits(hi_value), true), true};
  Bound hi = hi_bound ? *hi_bound : Bound{power_of_ten(open_side_digits(lo_value), false), true};
  // One digit more than either edge has, so an open interval between them is never empty.
  size_t max_frac = std::max<size_t>(
      {kMaxFractionDigits, lo.value.frac_digits.size() + 1, hi.value.frac_digits.size() + 1});
  Decimal zero;
  std::vector<ExprId> parts;
  if (lo.value < zero) {  // x = -y: y > 0 (or >= -hi), y <= -lo
    Bound y_lo = hi.value < zero ? Bound{decimal_negate(hi.value), hi.exclusive} : Bound{zero, true};
    Bound y_hi{decimal_negate(lo.value), lo.exclusive};
    parts.push_back(ir.seq({ir.literal("-"), magnitude_range(ir, y_lo, y_hi, max_frac)}));
  }
  if (hi.value >= zero) {
    Bound y_lo = lo.value >= zero ? lo : Bound{zero, false};
    parts.push_back(magnitude_range(ir, y_lo, hi, max_frac));
  }
  return ir.alt(std::move(parts));
}

ExprId any_json_number(GrammarIr& ir) {
  ExprId digit = ir.byte_range('0', '9');
  ExprId magnitude = ir.alt({ir.literal("0"),
                             ir.seq({ir.byte_range('1', '9'),
                                     ir.repeat(digit, 0, uint32_t(kMaxIntegerDigits - 1))})});
  ExprId fraction =
      ir.optional(ir.seq({ir.literal("."), ir.repeat(digit, 1, uint32_t(kMaxFractionDigits))}));
  ExprId sign = ir.optional(ir.alt({ir.literal("+"), ir.literal("-")}));
  ExprId exponent =
      ir.optional(ir.seq({ir.alt({ir.literal("e"), ir.literal("E")}), sign,
                          nonneg_range(ir, "0", std::to_string(kMaxExponent))}));
  return ir.seq({ir.optional(ir.literal("-")), magnitude, fraction, exponent});
}

}  // namespace tandem::grammar
