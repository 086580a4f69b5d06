// Element types and the conversions between them. Storage may be f32/bf16/f16, or
// f8_e4m3 (the KV cache's compact form); arithmetic on the CPU is always f32.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace tandem {

// F8E4M3 is OCP e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; finite range
// ±448, no infinities, S.1111.111 is NaN.
//
// The block types after it are ggml's (GGUF) weight formats, kept in their blocks in
// memory: a row of K values is K / block_elems blocks of block_bytes each, laid out exactly
// as ggml lays them out (each block's scales inside it), so a GGUF tensor is used as mapped.
enum class DType : uint8_t {
  F32, BF16, F16, I32, F8E4M3,
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
};

// Values per block (1 for the scalar types) and bytes per block.
struct DTypeBlock {
  int elems;
  int bytes;
};

constexpr DTypeBlock dtype_block(DType t) {
  switch (t) {
    case DType::F32: return {1, 4};
    case DType::BF16: return {1, 2};
    case DType::F16: return {1, 2};
    case DType::I32: return {1, 4};
    case DType::F8E4M3: return {1, 1};
    case DType::Q4_0: return {32, 18};
    case DType::Q4_1: return {32, 20};
    case DType::Q5_0: return {32, 22};
    case DType::Q5_1: return {32, 24};
    case DType::Q8_0: return {32, 34};
    case DType::Q2_K: return {256, 84};
    case DType::Q3_K: return {256, 110};
    case DType::Q4_K: return {256, 144};
    case DType::Q5_K: return {256, 176};
    case DType::Q6_K: return {256, 210};
    case DType::IQ4_NL: return {32, 18};
    case DType::IQ4_XS: return {256, 136};
  }
  return {1, 0};
}

constexpr bool dtype_is_block(DType t) { return dtype_block(t).elems > 1; }

// Bytes per element of a scalar type; 0 for a block type (use dtype_row_bytes).
constexpr size_t dtype_size(DType t) {
  const DTypeBlock b = dtype_block(t);
  return b.elems == 1 ? size_t(b.bytes) : 0;
}

// Bytes of `n` values of `t`; for a block type n must be a multiple of its block.
constexpr size_t dtype_row_bytes(DType t, int64_t n) {
  const DTypeBlock b = dtype_block(t);
  return size_t(n / b.elems) * size_t(b.bytes);
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::F8E4M3: return "f8_e4m3";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::Q8_0: return "q8_0";
    case DType::Q2_K: return "q2_k";
    case DType::Q3_K: return "q3_k";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
    case DType::IQ4_NL: return "iq4_nl";
    case DType::IQ4_XS: return "iq4_xs";
  }
  return "?";
}

// "F32", "BF16", "F16", "I32", "F8_E4M3" as safetensors spells them; nullopt otherwise.
// An F8_E4M3 tensor is only meaningful with its scales: the weight loader reads those
// (loader/quant_scheme.h) and refuses an FP8 tensor it has no scales for.
std::optional<DType> dtype_from_safetensors(std::string_view name);
std::string_view dtype_safetensors_name(DType t);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

float f8e4m3_to_f32(uint8_t b);
// Round to nearest even and saturate to ±448 (as CUDA's __NV_SATFINITE conversion does,
// so both backends store the same bytes); NaN stays NaN.
uint8_t f32_to_f8e4m3(float f);

// Converts n elements of `src` (of type `from`) to f32; for a block type n is a whole number
// of blocks, decoded as ggml does (dequantize_row, core/block_quant.h).
void convert_to_f32(const void* src, DType from, float* dst, size_t n);
// Converts n f32 elements to `to` (F32, BF16, F16 or F8E4M3).
void convert_from_f32(const float* src, void* dst, DType to, size_t n);

}  // namespace tandem
