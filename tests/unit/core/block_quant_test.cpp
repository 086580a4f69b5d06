// ggml block types: decoding hand-built blocks to the values ggml's formulas give, encoding
// random rows within each type's resolution, and refusing bad arguments. (The decoders'
// bit-exactness against llama.cpp's own files is tests/golden/gguf_arithmetic_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/block_quant.h"
#include "core/error.h"
#include "core/ggml_blocks.h"

namespace tandem {
namespace block_quant_test {

using namespace ggml;

constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0,   DType::Q5_1,
                            DType::Q8_0, DType::Q2_K, DType::Q3_K,   DType::Q4_K,
                            DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

std::vector<float> decode(DType t, const void* blocks, int64_t k) {
  std::vector<float> out(static_cast<size_t>(k));
  dequantize_row(t, blocks, out.data(), k);
  return out;
}

TEST(BlockQuant, Q4_0DecodesNibblesAroundEight) {
  BlockQ4_0 b{};
  b.d = f32_to_f16(0.5f);
  for (int j = 0; j < 16; j++) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  const std::vector<float> y = decode(DType::Q4_0, &b, 32);
  for (int j = 0; j < 16; j++) {
    EXPECT_EQ(y[size_t(j)], 0.5f * float(j - 8));
    EXPECT_EQ(y[size_t(j + 16)], 0.5f * float(7 - j));
  }
}

TEST(BlockQuant, Q5_1HighBitsComeFromQh) {
  BlockQ5_1 b{};
  b.d = f32_to_f16(2.f);
  b.m = f32_to_f16(-1.f);
  const uint32_t qh = 0x80000001u;  // value 0 and value 31 get their 5th bit
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x01;   // value 0: 1, value 16: 0
  b.qs[15] = 0x30;  // value 15: 0, value 31: 3
  const std::vector<float> y = decode(DType::Q5_1, &b, 32);
  EXPECT_EQ(y[0], 2.f * 17.f - 1.f);
  EXPECT_EQ(y[16], -1.f);
  EXPECT_EQ(y[31], 2.f * 19.f - 1.f);
  EXPECT_EQ(y[15], -1.f);
}

TEST(BlockQuant, Q4_KScalesAndMinsAsPacked) {
  BlockQ4_K b{};
  b.d = f32_to_f16(0.25f);
  b.dmin = f32_to_f16(0.125f);
  // Sub-block 1: sc 5, mn 3 (low bytes); sub-block 6: sc 0x2A, mn 0x35 (nibbles + top bits).
  b.scales[1] = 5;
  b.scales[5] = 3;
  b.scales[10] = 0xA | (0x5 << 4);
  b.scales[2] |= uint8_t((0x2A >> 4) << 6);
  b.scales[6] |= uint8_t((0x35 >> 4) << 6);
  int sc, mn;
  k4_scale_min(6, b.scales, sc, mn);
  EXPECT_EQ(sc, 0x2A);
  EXPECT_EQ(mn, 0x35);
  for (int l = 0; l < 32; l++) b.qs[l] = 0x90;       // sub-block 1 (high nibbles): 9
  for (int l = 0; l < 32; l++) b.qs[96 + l] = 0x07;  // sub-block 6 (low nibbles): 7
  const std::vector<float> y = decode(DType::Q4_K, &b, 256);
  EXPECT_EQ(y[32], 0.25f * 5.f * 9.f - 0.125f * 3.f);
  EXPECT_EQ(y[6 * 32 + 3], 0.25f * 42.f * 7.f - 0.125f * 53.f);
}

TEST(BlockQuant, Q6_KValuesFromLowAndHighBits) {
  BlockQ6_K b{};
  b.d = f32_to_f16(0.5f);
  for (int s = 0; s < 16; s++) b.scales[s] = int8_t(s - 8);
  b.ql[64 + 32 + 1] = 0xF3;  // half 1: value 128 + 32 + 1 low nibble 3, value 128 + 96 + 1 high 15
  b.qh[32 + 1] = uint8_t((2 << 2) | (1 << 6));  // run 1: high bits 2, run 3: high bits 1
  const std::vector<float> y = decode(DType::Q6_K, &b, 256);
  EXPECT_EQ(y[128 + 32 + 1], 0.5f * float(8 + 2 - 8) * float((3 | (2 << 4)) - 32));
  EXPECT_EQ(y[128 + 96 + 1], 0.5f * float(8 + 6 - 8) * float((15 | (1 << 4)) - 32));
  EXPECT_EQ(y[0], 0.5f * -8.f * -32.f);
}

TEST(BlockQuant, Q3_KScalesAndHighMask) {
  BlockQ3_K b{};
  b.d = f32_to_f16(1.f);
  // Sub-block 13 (scale 44): low nibble in the high half of byte 5, high bits 2 at byte 9 bit 6.
  b.scales[5] = 0xC << 4;
  b.scales[9] = 2 << 6;
  EXPECT_EQ(q3k_scale(b.scales, 13), 44);
  // Value 128 + 64 + 16 + 2 (half 1, shift run 2, sub-block 13): low bits 3, high bit set.
  b.qs[32 + 16 + 2] = 3 << 4;
  b.hmask[16 + 2] = 1 << 6;
  const std::vector<float> y = decode(DType::Q3_K, &b, 256);
  EXPECT_EQ(y[128 + 64 + 16 + 2], float(44 - 32) * 3.f);
  EXPECT_EQ(y[128 + 64 + 16 + 3], float(44 - 32) * -4.f);  // high bit clear: 0 − 4
}

TEST(BlockQuant, Iq4UsesTheNonLinearTable) {
  BlockIq4Xs b{};
  b.d = f32_to_f16(0.5f);
  b.scales_l[1] = 0x3 << 4;       // sub-block 3: low bits 3
  b.scales_h = uint16_t(2 << 6);  // high bits 2: ls = 35
  b.qs[48] = 0x0F;
  const std::vector<float> y = decode(DType::IQ4_XS, &b, 256);
  EXPECT_EQ(y[96], 0.5f * 3.f * 113.f);
  EXPECT_EQ(y[96 + 16], 0.5f * 3.f * -127.f);
  EXPECT_EQ(y[0], 0.5f * -32.f * -127.f);
}

// Encoding a random row and decoding it lands within the type's resolution: each value's
// error at most a step of its block's levels, and the row's error small against its norm.
TEST(BlockQuant, RoundTripWithinResolution) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  const int64_t k = 1024;
  std::vector<float> x(static_cast<size_t>(k));
  for (float& v : x) v = dist(rng);
  for (DType t : kTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<uint8_t> blocks(dtype_row_bytes(t, k));
    quantize_row(t, x.data(), blocks.data(), k);
    const std::vector<float> y = decode(t, blocks.data(), k);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < k; i++) {
      err += double(y[size_t(i)] - x[size_t(i)]) * (y[size_t(i)] - x[size_t(i)]);
      norm += double(x[size_t(i)]) * x[size_t(i)];
    }
    const double bits = t == DType::Q8_0                                             ? 8
                        : t == DType::Q2_K                                           ? 2
                        : t == DType::Q3_K                                           ? 3
                        : t == DType::Q6_K                                           ? 6
                        : (t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K) ? 5
                                                                                     : 4;
    // A uniform quantizer of b bits over ±3σ has rms error 6σ / 2^b / √12; per-block scales
    // do better (0.6–0.8 of it measured).
    EXPECT_LT(std::sqrt(err / norm), 6.0 / std::pow(2.0, bits) / std::sqrt(12.0));
  }
}

TEST(BlockQuant, ZeroRowsStayZero) {
  const std::vector<float> x(256, 0.f);
  for (DType t : kTypes) {
    std::vector<uint8_t> blocks(dtype_row_bytes(t, 256));
    quantize_row(t, x.data(), blocks.data(), 256);
    for (float v : decode(t, blocks.data(), 256)) EXPECT_EQ(v, 0.f) << dtype_name(t);
  }
}

TEST(BlockQuant, ConvertToF32DecodesBlocks) {
  BlockQ8_0 b{};
  b.d = f32_to_f16(0.25f);
  for (int j = 0; j < 32; j++) b.qs[j] = int8_t(j - 16);
  std::vector<float> y(32);
  convert_to_f32(&b, DType::Q8_0, y.data(), 32);
  for (int j = 0; j < 32; j++) EXPECT_EQ(y[size_t(j)], 0.25f * float(j - 16));
}

TEST(BlockQuant, RefusesPartialBlocksAndNonFiniteValues) {
  std::vector<uint8_t> blocks(1024);
  std::vector<float> x(256, 1.f);
  EXPECT_THROW(dequantize_row(DType::Q4_K, blocks.data(), x.data(), 100), Error);
  EXPECT_THROW(dequantize_row(DType::F32, blocks.data(), x.data(), 32), Error);
  x[3] = std::nanf("");
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), blocks.data(), 256), Error);
}

}  // namespace block_quant_test
}  // namespace tandem
