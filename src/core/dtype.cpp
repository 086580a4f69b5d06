#include "core/dtype.h"

#include <cmath>

#include "core/block_quant.h"
#include "core/error.h"

namespace tandem {

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "BF16") return DType::BF16;
  if (name == "F16") return DType::F16;
  if (name == "I32") return DType::I32;
  if (name == "F8_E4M3") return DType::F8E4M3;
  return std::nullopt;
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::F8E4M3: return "F8_E4M3";
    default: return "?";  // ggml block types have no safetensors name
  }
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int32_t exp = int32_t((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | uint32_t(exp) << 10 | mant >> 13;
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
  return uint16_t(half);
}

float f8e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0xf, mant = b & 7;
  const float sign = (b & 0x80) ? -1.f : 1.f;
  if (exp == 0xf && mant == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(float(mant), -9);  // subnormal: mant · 2^-9
  return sign * std::ldexp(float(8 + mant), exp - 10);      // (1 + mant/8) · 2^(exp-7)
}

uint8_t f32_to_f8e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7f;  // NaN
  const float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;            // saturate (infinities too)
  if (a < 0.015625f)  // below 2^-6: subnormal steps of 2^-9 (8 steps is the smallest normal)
    return sign | uint8_t(std::nearbyint(a * 512.f));
  // Normal: round the f32 mantissa to 3 bits, nearest even; a carry bumps the exponent.
  abs_bits += 0x7ffffu + ((abs_bits >> 20) & 1u);
  const int exp = int(abs_bits >> 23) - 127;    // in [-6, 8]; a < 448 rounds to 448 at most
  const uint32_t mant = (abs_bits >> 20) & 7u;
  return sign | uint8_t(uint32_t(exp + 7) << 3 | mant);
}

void convert_to_f32(const void* src, DType from, float* dst, size_t n) {
  switch (from) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::I32: {
      auto* s = static_cast<const int32_t*>(src);
      for (size_t i = 0; i < n; i++) dst[i] = float(s[i]);
      return;
    }
    case DType::F8E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; i++) dst[i] = f8e4m3_to_f32(s[i]);
      return;
    }
    default:  // a block type: n is a whole number of its blocks
      dequantize_row(from, src, dst, int64_t(n));
      return;
  }
}

void convert_from_f32(const float* src, void* dst, DType to, size_t n) {
  switch (to) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::F8E4M3: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; i++) d[i] = f32_to_f8e4m3(src[i]);
      return;
    }
    case DType::I32:
      fail("convert_from_f32: cannot convert to i32");
    default:
      fail("convert_from_f32: cannot convert to the block type {}", dtype_name(to));
  }
}

}  // namespace tandem
