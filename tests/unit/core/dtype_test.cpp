// The 16-bit conversions and the dtype table (core/dtype.h) against facts of the formats:
// bf16 is the top half of an f32, rounded to nearest even; f16 has 5 exponent bits (bias
// 15), subnormals below 2^-14 and infinities. (f8_e4m3: f8e4m3_test.cpp.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace tandem {
namespace dtype_test {

TEST(Dtype, SizesNamesAndSafetensorsSpellings) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::F8E4M3), 1u);
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::F8E4M3})
    EXPECT_EQ(dtype_from_safetensors(dtype_safetensors_name(t)), t) << dtype_name(t);
  EXPECT_FALSE(dtype_from_safetensors("F8_E5M2").has_value());
  EXPECT_FALSE(dtype_from_safetensors("F64").has_value());
  EXPECT_EQ(dtype_name(DType::F8E4M3), "f8_e4m3");
}

TEST(Dtype, Bf16IsTheTopHalfRoundedToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.f);
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one.
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(1.f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.f + 3 * std::ldexp(1.f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-INFINITY)), -INFINITY);
  // Every bf16 value round-trips exactly.
  for (uint32_t h = 0; h < 0x10000; h++) {
    const float f = bf16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16);
  }
}

TEST(Dtype, F16CoversNormalsSubnormalsAndInfinities) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.f);                 // largest finite
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));    // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.f, -14));    // smallest normal
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f32_to_f16(70000.f), 0x7c00);                 // overflows to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -26)), 0x0000);    // below half the smallest step
  EXPECT_EQ(f32_to_f16(std::ldexp(3.f, -25)), 0x0002);    // 1.5 steps: ties to even (2)
  for (uint32_t h = 0; h < 0x10000; h++) {  // every f16 value round-trips exactly
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(Dtype, ArrayConversionsAgreeWithTheScalarOnes) {
  const std::vector<float> x{0.f, -1.5f, 3.14159f, 1e-6f, -65000.f, 448.f, std::bit_cast<float>(0x3f808000u)};
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F8E4M3}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<uint8_t> stored(x.size() * dtype_size(t));
    convert_from_f32(x.data(), stored.data(), t, x.size());
    std::vector<float> back(x.size());
    convert_to_f32(stored.data(), t, back.data(), x.size());
    for (size_t i = 0; i < x.size(); i++) {
      const float want = t == DType::F32    ? x[i]
                         : t == DType::BF16 ? bf16_to_f32(f32_to_bf16(x[i]))
                         : t == DType::F16  ? f16_to_f32(f32_to_f16(x[i]))
                                            : f8e4m3_to_f32(f32_to_f8e4m3(x[i]));
      EXPECT_EQ(back[i], want) << "x = " << x[i];
    }
  }
  const int32_t ids[3] = {-7, 0, 123456};
  float as_f32[3];
  convert_to_f32(ids, DType::I32, as_f32, 3);
  EXPECT_EQ(as_f32[2], 123456.f);
  EXPECT_THROW(convert_from_f32(as_f32, as_f32, DType::I32, 3), Error);
}

}  // namespace dtype_test
}  // namespace tandem
