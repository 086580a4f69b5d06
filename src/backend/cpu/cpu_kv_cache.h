// The element types a CPU KV cache may hold: f32 (the activations as computed) or
// f8_e4m3 (one byte per value, scale 1, as vLLM's uncalibrated `--kv-cache-dtype fp8`).
// Writers store f32 rows in the cache's dtype; readers see every cache row as f32
// through KvRows<T>, which hands out f32 rows in place and decodes f8 rows into the
// caller's scratch, so the arithmetic after the read is the same code for both dtypes
// (an f8 cache gives exactly what an f32 cache of the rounded values gives).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "backend/backend.h"

namespace tandem::cpu {

// Fails unless cache.k and cache.v are defined CPU tensors of one dtype the CPU backend
// stores KV in (f32 or f8_e4m3) and of one shape; returns that dtype.
//   "attention: KV cache dtype bf16 is not supported on the cpu (f32 or f8_e4m3)"
DType check_kv_cache(const PagedKv& cache, std::string_view op);

// dst[i] = f8e4m3_to_f32(src[i]) for i < n, bit for bit (NaN codes give a NaN). Branch-free
// bit moves rather than a table lookup, so the loop vectorizes (a gather does not pay).
inline void decode_f8e4m3(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const uint32_t sign = uint32_t(src[i] & 0x80) << 24, mag = src[i] & 0x7fu;
    // Exponent and mantissa move into place and the bias goes from 7 to 127: the value
    // of a normal code. A subnormal code (exponent 0, value m · 2^-9) gets exponent 1
    // instead, 2^-6 · (1 + m/8), less 2^-6: exact, and no f32 denormal is touched.
    const uint32_t placed = mag << 20;
    const uint32_t normal = placed + (120u << 23), lifted = placed + (121u << 23);
    float sub;
    std::memcpy(&sub, &lifted, 4);
    sub -= 0x1p-6f;
    uint32_t subnormal;
    std::memcpy(&subnormal, &sub, 4);
    // Selects by masks (all ones or zero), which vectorize where ?: becomes a branch.
    const uint32_t is_sub = 0u - uint32_t(mag < 8), is_nan = 0u - uint32_t(mag == 0x7fu);
    uint32_t bits = (subnormal & is_sub) | (normal & ~is_sub);
    bits = ((bits & ~is_nan) | (0x7fc00000u & is_nan)) | sign;
    std::memcpy(&dst[i], &bits, 4);
  }
}

// Stores n f32 values at element `offset` of `cache` (f32 or f8_e4m3: round to nearest
// even, saturating to ±448).
void store_kv_values(Tensor& cache, int64_t offset, const float* src, int64_t n);

// Rows of a cache tensor read as f32.   base [NB, BS, Hkv, Dh] of T
template <typename T>
struct KvRows;

template <>
struct KvRows<float> {
  const float* base;
  explicit KvRows(const void* data) : base(static_cast<const float*>(data)) {}
  // The n values at element `offset`, in place (scratch is unused).
  const float* row(int64_t offset, int64_t /*n*/, float* /*scratch*/) const {
    return base + offset;
  }
};

template <>
struct KvRows<uint8_t> {
  const uint8_t* base;
  explicit KvRows(const void* data) : base(static_cast<const uint8_t*>(data)) {}
  // The n values at element `offset`, decoded into scratch (>= n floats).
  const float* row(int64_t offset, int64_t n, float* scratch) const {
    decode_f8e4m3(base + offset, scratch, n);
    return scratch;
  }
};

}  // namespace tandem::cpu
