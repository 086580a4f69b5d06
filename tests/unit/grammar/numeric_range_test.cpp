// Integer and decimal ranges against brute force: every numeral in a window, for many
// bounds, is accepted exactly when its value is inside.
#include <fmt/format.h>

#include <random>

#include "grammar/numeric_range.h"
#include "grammar_test_support.h"

namespace tandem::grammar::test {
namespace numeric_range_test {

std::string bound_schema(const char* type, std::optional<long> lo, bool lo_ex,
                         std::optional<long> hi, bool hi_ex) {
  Json s = {{"type", type}};
  if (lo) s[lo_ex ? "exclusiveMinimum" : "minimum"] = *lo;
  if (hi) s[hi_ex ? "exclusiveMaximum" : "maximum"] = *hi;
  return s.dump();
}

TEST(IntegerRange, EveryNumeralInAWindow) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<long> pick(-1200, 1200);
  for (int trial = 0; trial < 60; ++trial) {
    std::optional<long> lo = pick(rng), hi = pick(rng);
    if (trial % 5 == 1) lo.reset();
    if (trial % 5 == 2) hi.reset();
    if (lo && hi && *lo > *hi) std::swap(*lo, *hi);
    bool lo_ex = trial % 3 == 0, hi_ex = trial % 4 == 0;
    long first = lo ? *lo + lo_ex : -100000, last = hi ? *hi - hi_ex : 100000;
    if (first > last) continue;
    std::string schema = bound_schema("integer", lo, lo_ex, hi, hi_ex);
    SCOPED_TRACE(schema);
    GrammarSpec spec = schema_spec(schema);
    for (long n = -1500; n <= 1500; ++n)
      ASSERT_EQ(accepts(spec, std::to_string(n)), n >= first && n <= last) << n;
    EXPECT_EQ(accepts(spec, "123456789"), !hi);
    EXPECT_EQ(accepts(spec, "-123456789"), !lo);
    EXPECT_FALSE(accepts(spec, "-0"));
    EXPECT_FALSE(accepts(spec, "007"));
  }
}

TEST(IntegerRange, ExactPowersOfTen) {
  GrammarSpec spec = schema_spec(R"({"type":"integer","minimum":10,"maximum":1000})");
  for (long n : {9L, 10L, 99L, 100L, 999L, 1000L, 1001L})
    EXPECT_EQ(accepts(spec, std::to_string(n)), n >= 10 && n <= 1000) << n;
}

// Decimal numerals with up to 3 fraction digits (and redundant zeros), in a window.
std::vector<std::pair<std::string, double>> decimal_numerals() {
  std::vector<std::pair<std::string, double>> out;
  for (int thousandths = -3500; thousandths <= 3500; thousandths += 7) {
    int whole = std::abs(thousandths) / 1000, frac = std::abs(thousandths) % 1000;
    std::string sign = thousandths < 0 ? "-" : "";
    std::string f = fmt::format("{:03d}", frac);
    double value = thousandths / 1000.0;
    out.push_back({sign + std::to_string(whole) + "." + f, value});
    out.push_back({sign + std::to_string(whole) + "." + f + "0", value});
    while (!f.empty() && f.back() == '0') f.pop_back();
    if (!f.empty() || thousandths != 0 || sign.empty())
      out.push_back({sign + std::to_string(whole) + (f.empty() ? "" : "." + f), value});
  }
  return out;
}

TEST(NumberRange, EveryDecimalInAWindow) {
  const double bounds[] = {-2.5, -1, -0.125, 0, 0.5, 1, 1.75, 2.999, 3};
  auto numerals = decimal_numerals();
  for (double lo : bounds) {
    for (double hi : bounds) {
      if (hi < lo) continue;
      for (int ex = 0; ex < 4; ++ex) {
        bool lo_ex = ex & 1, hi_ex = ex & 2;
        if (lo == hi && ex != 0) continue;  // empty: a compile error (GrammarErrors tests it)
        Json s = {{"type", "number"},
                  {lo_ex ? "exclusiveMinimum" : "minimum", lo},
                  {hi_ex ? "exclusiveMaximum" : "maximum", hi}};
        SCOPED_TRACE(s.dump());
        GrammarSpec spec = GrammarSpec::json_schema(s);
        for (const auto& [text, v] : numerals) {
          bool inside = (lo_ex ? v > lo : v >= lo) && (hi_ex ? v < hi : v <= hi);
          bool canonical = text.rfind("-0", 0) != 0 || v != 0;  // never "-0..."
          ASSERT_EQ(accepts(spec, text), inside && canonical) << text;
        }
      }
    }
  }
}

TEST(NumberRange, OneSidedAndExponentFree) {
  GrammarSpec positive = schema_spec(R"({"type":"number","exclusiveMinimum":0})");
  for (const char* t : {"0.001", "5", "123.25", "1000000"}) EXPECT_TRUE(accepts(positive, t)) << t;
  for (const char* t : {"0", "0.000", "-1", "-0.5", "1e3"}) EXPECT_FALSE(accepts(positive, t)) << t;
  GrammarSpec below = schema_spec(R"({"type":"number","maximum":-0.25})");
  for (const char* t : {"-0.25", "-0.26", "-3", "-1000.5"}) EXPECT_TRUE(accepts(below, t)) << t;
  for (const char* t : {"-0.24", "0", "-0.2", "1"}) EXPECT_FALSE(accepts(below, t)) << t;
}

// A writer that always wants more digits (what a random-weight model at temperature 0 is
// often like): it takes a digit whenever one is allowed, then '.', 'e', a sign, EOS, and
// only then the first byte allowed. Every number is bounded, so it still ends, and soon.
struct DigitHungryWalk {
  std::string text;
  bool ended = false;
};

DigitHungryWalk digit_hungry_walk(const GrammarSpec& spec, int max_steps) {
  Matcher m(compiled(spec));
  std::vector<uint32_t> words(m.grammar().vocab().num_mask_words());
  DigitHungryWalk walk;
  auto allowed = [&](int id) { return (words[size_t(id) / 32] >> (id % 32)) & 1u; };
  const std::string preference = "9876543210.eE-+";
  for (int step = 0; step < max_steps && !walk.ended; ++step) {
    m.fill_mask(words);
    int pick = -1;
    for (char c : preference)
      if (pick < 0 && allowed(uint8_t(c))) pick = uint8_t(c);
    if (pick < 0 && allowed(256)) pick = 256;  // EOS
    for (int id = 0; id < 256 && pick < 0; ++id)
      if (allowed(id)) pick = id;
    EXPECT_GE(pick, 0) << "nothing allowed after " << walk.text;
    if (pick < 0) break;
    EXPECT_TRUE(m.accept_token(pick));
    if (pick == 256) walk.ended = true;
    else walk.text += char(pick);
  }
  return walk;
}

TEST(NumberBounds, DigitHungryWritersEnd) {
  const char* schemas[] = {
      R"({"type":"integer"})",
      R"({"type":"number"})",
      R"({"type":"integer","minimum":0})",
      R"({"type":"number","exclusiveMinimum":0})",
      R"({"type":"number","maximum":-1.5})",
      R"({"type":"object","properties":{"total":{"type":"number"},"n":{"type":"integer"}},
          "required":["total","n"]})",
      R"({"type":"array","items":{"type":"number"},"maxItems":3})",
  };
  for (const char* text : schemas) {
    SCOPED_TRACE(text);
    DigitHungryWalk walk = digit_hungry_walk(schema_spec(text), 400);
    ASSERT_TRUE(walk.ended) << walk.text;
    EXPECT_LE(walk.text.size(), 200u) << walk.text;
  }
  // Where the nines stop: the 19th would pass int64's maximum; the integer part of a
  // number has 19 digits, its fraction 16, and its exponent is at most 288 (so "e99").
  EXPECT_EQ(digit_hungry_walk(schema_spec(R"({"type":"integer"})"), 100).text,
            "999999999999999999");
  EXPECT_EQ(digit_hungry_walk(schema_spec(R"({"type":"number"})"), 100).text,
            "9999999999999999999.9999999999999999e99");
  EXPECT_EQ(digit_hungry_walk(schema_spec(R"({"type":"number","minimum":0})"), 100).text,
            "9999999999999999999.9999999999999999");
  // A JSON value anywhere (json_object) is bounded the same way.
  EXPECT_TRUE(accepts(GrammarSpec::json_object(), R"({"a":-9999999999999999999.5e-288})"));
  EXPECT_FALSE(accepts(GrammarSpec::json_object(), R"({"a":1e289})"));
  EXPECT_FALSE(accepts(GrammarSpec::json_object(), R"({"a":99999999999999999999})"));
  EXPECT_FALSE(accepts(GrammarSpec::json_object(), R"({"a":1.12345678901234567})"));
  EXPECT_FALSE(accepts(GrammarSpec::json_object(), R"({"a":1e1000})"));
}

TEST(Decimal, ParseCompareRound) {
  auto d = [](const char* t) { return *parse_decimal(t); };
  EXPECT_EQ(d("1e-07").to_string(), "0.0000001");
  EXPECT_EQ(d("-1.50E+2").to_string(), "-150");
  EXPECT_EQ(d("-0.000").to_string(), "0");
  EXPECT_EQ(d("0012.3400").to_string(), "12.34");
  EXPECT_FALSE(parse_decimal("1."));
  EXPECT_FALSE(parse_decimal(".5"));
  EXPECT_FALSE(parse_decimal("1e"));
  EXPECT_TRUE(d("-2") < d("-1.5"));
  EXPECT_TRUE(d("0.1") < d("0.10001"));
  EXPECT_TRUE(d("10") > d("9.999"));
  EXPECT_EQ(decimal_floor(d("-1.5")).to_string(), "-2");
  EXPECT_EQ(decimal_ceil(d("-1.5")).to_string(), "-1");
  EXPECT_EQ(decimal_ceil(d("-0.5")).to_string(), "0");
  EXPECT_EQ(decimal_floor(d("2.01")).to_string(), "2");
  EXPECT_EQ(integer_add(d("0"), -1).to_string(), "-1");
  EXPECT_EQ(integer_add(d("-1"), +1).to_string(), "0");
  EXPECT_EQ(integer_add(d("999"), +1).to_string(), "1000");
  EXPECT_EQ(decimal_from_json(Json(0.1))->to_string(), "0.1");
  EXPECT_EQ(decimal_from_json(Json(18446744073709551615ull))->to_string(), "18446744073709551615");
}

}  // namespace numeric_range_test
}  // namespace tandem::grammar::test
