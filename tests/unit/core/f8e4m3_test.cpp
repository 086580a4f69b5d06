// The f8_e4m3 conversions the KV cache stores through (core/dtype.h), checked against
// hand-derived facts of the OCP e4m3fn format (1 sign, 4 exponent bits with bias 7, 3
// mantissa bits; no infinities; S.1111.111 is NaN; largest finite 448), and against a
// brute-force nearest-code search. (How the CPU backend stores them:
// tests/unit/backend/cpu_f8_storage_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.h"

namespace tandem {
namespace f8e4m3_test {

// The value of a code from the format's definition, in double.
double spec_value(int code) {
  const int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
  const double magnitude = exponent == 0 ? mantissa / 8.0 * std::pow(2.0, -6)
                                         : (1 + mantissa / 8.0) * std::pow(2.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

bool is_nan_code(int code) {
  return (code & 0x7f) == 0x7f;
}

TEST(F8E4M3, EveryCodeDecodesToItsDefinedValue) {
  for (int code = 0; code < 256; code++) {
    SCOPED_TRACE(testing::Message() << "code 0x" << std::hex << code);
    const float got = f8e4m3_to_f32(uint8_t(code));
    if (is_nan_code(code)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    EXPECT_EQ(double(got), spec_value(code));
    EXPECT_EQ(std::signbit(got), code >= 0x80);
  }
}

TEST(F8E4M3, KnownCodes) {
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.f);
  EXPECT_EQ(f8e4m3_to_f32(0x40), 2.f);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.f);
  EXPECT_EQ(f8e4m3_to_f32(0xfe), -448.f);
  EXPECT_EQ(f8e4m3_to_f32(0x78), 256.f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(f8e4m3_to_f32(0x07), 7 * std::ldexp(1.f, -9));
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0xff)));
  const float negative_zero = f8e4m3_to_f32(0x80);
  EXPECT_EQ(negative_zero, 0.f);
  EXPECT_TRUE(std::signbit(negative_zero));
  EXPECT_EQ(f8e4m3_to_f32(0x00), 0.f);
  EXPECT_FALSE(std::signbit(f8e4m3_to_f32(0x00)));
}

TEST(F8E4M3, PositiveCodesIncreaseStrictly) {
  for (int code = 1; code <= 0x7e; code++)
    EXPECT_LT(f8e4m3_to_f32(uint8_t(code - 1)), f8e4m3_to_f32(uint8_t(code))) << code;
}

TEST(F8E4M3, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; code++) {
    if (is_nan_code(code)) continue;
    EXPECT_EQ(int(f32_to_f8e4m3(f8e4m3_to_f32(uint8_t(code)))), code) << "code " << code;
  }
  EXPECT_TRUE(is_nan_code(f32_to_f8e4m3(std::numeric_limits<float>::quiet_NaN())));
}

TEST(F8E4M3, TiesRoundToEven) {
  // 1.0 = 0x38 and 1.125 = 0x39: the midpoint goes to the even mantissa, 1.0.
  EXPECT_EQ(f32_to_f8e4m3(1.0625f), 0x38);
  // 1.125 = 0x39 and 1.25 = 0x3a: the midpoint goes to 1.25.
  EXPECT_EQ(f32_to_f8e4m3(1.1875f), 0x3a);
  EXPECT_EQ(f32_to_f8e4m3(-1.1875f), 0xba);
  // Just off the midpoint rounds to the nearer neighbour.
  EXPECT_EQ(f32_to_f8e4m3(std::nextafter(1.0625f, 2.f)), 0x39);
  EXPECT_EQ(f32_to_f8e4m3(std::nextafter(1.1875f, 0.f)), 0x39);
  // 15.5 lies between 15 (0x57) and 16 (0x58, the next binade): even is 16.
  EXPECT_EQ(f32_to_f8e4m3(15.5f), 0x58);
}

TEST(F8E4M3, SaturatesToTheLargestFinite) {
  EXPECT_EQ(f32_to_f8e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(-500.f), 0xfe);
  EXPECT_EQ(f32_to_f8e4m3(464.f), 0x7e);  // the midpoint to the NaN code's value 480
  EXPECT_EQ(f32_to_f8e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
}

TEST(F8E4M3, TinyValuesRoundIntoTheSubnormals) {
  EXPECT_EQ(f32_to_f8e4m3(std::ldexp(1.f, -11)), 0x00);      // a quarter step: 0
  EXPECT_EQ(f32_to_f8e4m3(std::ldexp(1.f, -10)), 0x00);      // half a step, tie: even 0
  EXPECT_EQ(f32_to_f8e4m3(3 * std::ldexp(1.f, -10)), 0x02);  // 1.5 steps, tie: even 2 · 2^-9
  EXPECT_EQ(f32_to_f8e4m3(5 * std::ldexp(1.f, -10)), 0x02);  // 2.5 steps, tie: even 2 · 2^-9
  EXPECT_EQ(f32_to_f8e4m3(-std::ldexp(1.f, -9)), 0x81);
  EXPECT_EQ(f32_to_f8e4m3(1e-30f), 0x00);
  EXPECT_EQ(f32_to_f8e4m3(-1e-30f), 0x80);  // the sign survives underflow
}

// The nearest finite code by search (ties: the even code), the definition of the rounding.
int nearest_code(float x) {
  int best = -1;
  double best_err = INFINITY;
  for (int code = 0; code < 256; code++) {
    if (is_nan_code(code) || (code >= 0x80) != std::signbit(x)) continue;
    const double err = std::fabs(double(x) - spec_value(code));
    if (err < best_err || (err == best_err && code % 2 == 0)) best = code, best_err = err;
  }
  return best;
}

TEST(F8E4M3, RoundsToTheNearestCodeOverTheWholeRange) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1.f, 2.f);
  std::uniform_int_distribution<int> exponent(-12, 8);
  for (int i = 0; i < 20000; i++) {
    const float x = (i % 2 ? -1.f : 1.f) * std::ldexp(mantissa(rng), exponent(rng));
    const float clamped = std::fabs(x) >= 448.f ? std::copysign(448.f, x) : x;
    ASSERT_EQ(int(f32_to_f8e4m3(x)), nearest_code(clamped)) << "x = " << x;
  }
  for (int code = 1; code <= 0x7e; code++) {  // every midpoint between neighbours
    const float mid = float((spec_value(code - 1) + spec_value(code)) / 2);
    EXPECT_EQ(int(f32_to_f8e4m3(mid)), code % 2 == 0 ? code : code - 1) << "mid " << mid;
  }
}

}  // namespace f8e4m3_test
}  // namespace tandem
