// The f8_e4m3 KV cache's conversions on the device, matching the host's
// f32_to_f8e4m3 / f8e4m3_to_f32 (core/dtype.h): round to nearest even, saturate to
// ±448, NaN stays NaN. Every e4m3 value is exact in f16 and in bf16, so widening loses
// nothing; a value is rounded to bf16 before it is narrowed, so the fused and unfused
// cache writes store the same bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace tandem::cuda {

__device__ __forceinline__ uint8_t f8_from_f32(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// e4m3(x) for a double: nearest even, saturating.
__device__ __forceinline__ uint8_t f8_from_f64(double x) {
  return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// Whether an f32 value lies within 8 ulps of a midpoint between two e4m3 values (where
// which way it rounds depends on the last bits of the arithmetic that made it).
__device__ __forceinline__ bool near_e4m3_midpoint(float q) {
  const float a = fabsf(q);
  if (a < 0.015625f) {  // subnormal e4m3: midpoints at (j + 1/2) · 2^-9
    const float t = a * 512.f, frac = t - floorf(t);
    return fabsf(frac - 0.5f) <= 8e-6f;
  }
  const uint32_t low = __float_as_uint(a) & 0xfffffu;  // the bits below e4m3's 3 of mantissa
  return low + 8u - 0x80000u <= 16u;
}

// e4m3(x / s) with the quotient in f64 — s64 = the scale in f64, inv32 = 1 / (float)s64 —
// as the CPU twin (cpu_linear_fp8.cpp) and the reference arithmetic compute it: with bf16
// inputs the exact quotient often sits on an e4m3 midpoint, and only the same arithmetic
// breaks such ties the same way. The f32 product x · inv32 is within 3 ulps of the f64
// quotient, so it rounds the same way unless it is near a midpoint; only then is the f64
// division done.
__device__ __forceinline__ uint8_t f8_quotient(float x, double s64, float inv32) {
  const float q = x * inv32;
  return near_e4m3_midpoint(q) ? f8_from_f64(double(x) / s64) : f8_from_f32(q);
}

// The FP8 linears' dynamic per-token scale of a row whose largest |value| is amax, as the
// quantize kernel (cuda_linear_fp8.cu) and the CPU twin compute it: in f64.
__device__ __forceinline__ double f8_row_scale(float amax) {
  return fmax(double(amax), 1e-12) / 448.0;
}

// q[c, c + N) = e4m3(row[c, c + N) / s) for the columns c = g·N, g·N + G·N, ... of a row of C
// bf16 values: thread g of a group of G's share of the FP8 linears' input quantization (the
// quantize kernel's, and the Fp8Input copies of backend/linear.h, where the thread reads back
// what it wrote itself, so without a barrier). kVec: C % 8 == 0, N == 8, row 16- and q
// 8-byte aligned.
template <int N, bool kVec>
__device__ __forceinline__ void quantize_row(uint8_t* q, const __nv_bfloat16* row, int64_t C,
                                             int g, int G, double s) {
  const float inv = float(1.0 / s);
  for (int64_t c = int64_t(g) * N; c < C; c += int64_t(G) * N) {
    if constexpr (kVec) {
      static_assert(N == 8, "8 columns per vector load");
      const uint4 u = *reinterpret_cast<const uint4*>(row + c);
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&u);
      uint32_t b[2] = {0, 0};
#pragma unroll
      for (int i = 0; i < 8; i++)
        b[i / 4] |= uint32_t(f8_quotient(__bfloat162float(e[i]), s, inv)) << (8 * (i % 4));
      *reinterpret_cast<uint2*>(q + c) = make_uint2(b[0], b[1]);
    } else {
      for (int i = 0; i < N && c + i < C; i++) q[c + i] = f8_quotient(__bfloat162float(row[c + i]), s, inv);
    }
  }
}

// The cache byte of a value the bf16 path would have stored as bf16(x).
__device__ __forceinline__ uint8_t f8_from_bf16(__nv_bfloat16 x) {
  return f8_from_f32(__bfloat162float(x));
}

// Two e4m3 bytes (lo in bits 0-7) -> f16x2 (lo in bits 0-15), exactly: one cvt.
__device__ __forceinline__ uint32_t f16x2_from_f8x2(uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

// Two e4m3 bytes (lo in bits 0-7) -> bf16x2, exactly (through f16, then f32).
__device__ __forceinline__ uint32_t bf16x2_from_f8x2(uint16_t pair) {
  const uint32_t h = f16x2_from_f8x2(pair);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __float22bfloat162_rn(f);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// 16 e4m3 bytes -> 16 bf16 (lo: elements 0-7, hi: 8-15).
__device__ __forceinline__ void bf16x16_from_f8x16(const uint4& in, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t out[8];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    out[2 * i] = bf16x2_from_f8x2(uint16_t(w[i] & 0xffffu));
    out[2 * i + 1] = bf16x2_from_f8x2(uint16_t(w[i] >> 16));
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

// The weight stream's product (cuda_gemv_fp8.cu): d += A (16 x 32, e4m3) · B (32 x 8,
// e4m3), f32 accumulate.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace tandem::cuda
