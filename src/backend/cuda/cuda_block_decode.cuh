// Device-side decoding of ggml's block types (core/ggml_blocks.h) for the CUDA kernels, in the
// shape the CPU kernels use (cpu_block_decode.h): a block of E values (32 or 256) is read in
// octets, 8 consecutive values that share one run of 16 and so one scale s and one bias b:
//     value_i = s · (u_i − o) + b          (u_i: the level, an 8-bit lane of lv; o: kOffset)
// kSigned types (Q8_0, IQ4_NL, IQ4_XS) give their levels as signed bytes with o = 0: the
// integer kernels take them as they are (dp4a is signed × signed); the others give unsigned
// bytes with their offset. s and b are f32 (s = d·sc, b = dm·mn, as the CPU twin's BlockHead).
//
// Blocks are only 2-byte aligned in general (18, 22, 34, 110, 210 bytes), so words are read as
// two 16-bit halves unless the type's blocks keep 4-byte alignment (kAlign4).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/ggml_blocks.h"

namespace tandem::cuda {

// 8 levels (two words of 4 bytes, value i in byte i % 4 of word i / 4) and their scale.
struct Octet {
  uint32_t lv[2];
  float s, b;
};

__device__ __forceinline__ float half_to_f32(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

template <bool kAlign4>
__device__ __forceinline__ uint32_t word_at(const uint8_t* p) {
  if constexpr (kAlign4) return *reinterpret_cast<const uint32_t*>(p);
  const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
  return uint32_t(q[0]) | (uint32_t(q[1]) << 16);
}

// Bits [8i, 8i + 8) of `bits`' byte i, spread: byte j of the result = bit j of `byte8` · 0x10,
// for j in [4w, 4w + 4).
__device__ __forceinline__ uint32_t bits_as_0x10(uint32_t byte8, int w) {
  const uint32_t b = byte8 >> (4 * w);
  return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25);
}

// IQ4 values of 4 indices (one per byte of idx, each < 16), as signed bytes.
__device__ __forceinline__ uint32_t iq4_lookup(uint32_t idx) {
  // kIq4Values as 4 words of 4 bytes; __byte_perm picks among 8 bytes with a 3-bit selector.
  // Its selector is one nibble per result byte: the four 3-bit indices packed into 16 bits.
  constexpr uint32_t t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu, t2 = 0x26190D01u, t3 = 0x71594535u;
  const uint32_t i3 = idx & 0x07070707u, packed = i3 | (i3 >> 4);
  const uint32_t selector = (packed & 0xFFu) | ((packed >> 8) & 0xFF00u);
  const uint32_t lo = __byte_perm(t0, t1, selector);
  const uint32_t hi = __byte_perm(t2, t3, selector);
  // Bytes whose index has bit 3 set take hi: a byte mask from bit 3 of each byte.
  const uint32_t sel = ((idx >> 3) & 0x01010101u) * 0xFFu;
  return (hi & sel) | (lo & ~sel);
}

// Octets<T>::get(block, o): octet o (0 .. E/8 − 1) of one block. kElems, kBytes, kOffset,
// kSigned as above.
template <DType T>
struct Octets;

// The nibbles of a 32-value block laid out as Q4_0 (value j low nibble of qs[j], j + 16 high):
// octet o reads qs[8 (o mod 2)] and takes the low (o < 2) or high nibbles.
template <bool kAlign4>
__device__ __forceinline__ void q4_nibbles(const uint8_t* qs, int o, uint32_t (&lv)[2]) {
  const int shift = o < 2 ? 0 : 4;
  const uint8_t* p = qs + 8 * (o & 1);
  lv[0] = (word_at<kAlign4>(p) >> shift) & 0x0F0F0F0Fu;
  lv[1] = (word_at<kAlign4>(p + 4) >> shift) & 0x0F0F0F0Fu;
}

template <>
struct Octets<DType::Q4_0> {
  static constexpr int kElems = 32, kBytes = 18, kOffset = 8;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ4_0*>(p);
    Octet r;
    q4_nibbles<false>(b->qs, o, r.lv);
    r.s = half_to_f32(b->d);
    r.b = 0.f;
    return r;
  }
};

template <>
struct Octets<DType::Q4_1> {
  static constexpr int kElems = 32, kBytes = 20, kOffset = 0;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ4_1*>(p);
    Octet r;
    q4_nibbles<true>(b->qs, o, r.lv);
    r.s = half_to_f32(b->d);
    r.b = half_to_f32(b->m);
    return r;
  }
};

// Q5_0 / Q5_1: the nibbles plus bit 8o + i of qh as the level's 0x10.
template <bool kAlign4>
__device__ __forceinline__ void q5_levels(const uint8_t* qh, const uint8_t* qs, int o,
                                          uint32_t (&lv)[2]) {
  q4_nibbles<kAlign4>(qs, o, lv);
  const uint32_t high = (word_at<kAlign4>(qh) >> (8 * o)) & 0xFFu;
  lv[0] |= bits_as_0x10(high, 0);
  lv[1] |= bits_as_0x10(high, 1);
}

template <>
struct Octets<DType::Q5_0> {
  static constexpr int kElems = 32, kBytes = 22, kOffset = 16;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ5_0*>(p);
    Octet r;
    q5_levels<false>(b->qh, b->qs, o, r.lv);
    r.s = half_to_f32(b->d);
    r.b = 0.f;
    return r;
  }
};

template <>
struct Octets<DType::Q5_1> {
  static constexpr int kElems = 32, kBytes = 24, kOffset = 0;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ5_1*>(p);
    Octet r;
    q5_levels<true>(b->qh, b->qs, o, r.lv);
    r.s = half_to_f32(b->d);
    r.b = half_to_f32(b->m);
    return r;
  }
};

template <>
struct Octets<DType::Q8_0> {
  static constexpr int kElems = 32, kBytes = 34, kOffset = 0;
  static constexpr bool kSigned = true;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ8_0*>(p);
    const uint8_t* q = reinterpret_cast<const uint8_t*>(b->qs) + 8 * o;
    return {{word_at<false>(q), word_at<false>(q + 4)}, half_to_f32(b->d), 0.f};
  }
};

template <>
struct Octets<DType::IQ4_NL> {
  static constexpr int kElems = 32, kBytes = 18, kOffset = 0;
  static constexpr bool kSigned = true;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockIq4Nl*>(p);
    Octet r;
    q4_nibbles<false>(b->qs, o, r.lv);
    r.lv[0] = iq4_lookup(r.lv[0]);
    r.lv[1] = iq4_lookup(r.lv[1]);
    r.s = half_to_f32(b->d);
    r.b = 0.f;
    return r;
  }
};

// The k-quants: octet o is values [8o, 8o + 8) of group g = o / 4 (32 values), at l0 = 8 (o mod 4)
// within it; its run of 16 is o / 2.

template <>
struct Octets<DType::Q2_K> {
  static constexpr int kElems = 256, kBytes = 84, kOffset = 0;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ2_K*>(p);
    const int g = o / 4, shift = 2 * (g % 4);
    const uint8_t* q = b->qs + 32 * (g / 4) + 8 * (o % 4);
    const int sc = b->scales[o / 2];
    return {
        {(word_at<true>(q) >> shift) & 0x03030303u, (word_at<true>(q + 4) >> shift) & 0x03030303u},
        half_to_f32(b->d) * float(sc & 0xF),
        -half_to_f32(b->dmin) * float(sc >> 4)};
  }
};

template <>
struct Octets<DType::Q3_K> {
  static constexpr int kElems = 256, kBytes = 110, kOffset = 4;
  static constexpr bool kSigned = false;
  // u = low 2 bits | high bit << 2, so u − 4 is ggml's low − (high ? 0 : 4).
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ3_K*>(p);
    const int g = o / 4, n = g / 4, j = g % 4, l0 = 8 * (o % 4);
    const uint8_t* q = b->qs + 32 * n + l0;
    const uint8_t* h = b->hmask + l0;
    Octet r;
    for (int w = 0; w < 2; w++)
      r.lv[w] = ((word_at<false>(q + 4 * w) >> (2 * j)) & 0x03030303u) |
                (((word_at<false>(h + 4 * w) >> (4 * n + j)) & 0x01010101u) << 2);
    r.s = half_to_f32(b->d) * float(ggml::q3k_scale(b->scales, o / 2) - 32);
    r.b = 0.f;
    return r;
  }
};

template <>
struct Octets<DType::Q4_K> {
  static constexpr int kElems = 256, kBytes = 144, kOffset = 0;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ4_K*>(p);
    const int g = o / 4, shift = 4 * (g % 2);
    const uint2 q = *reinterpret_cast<const uint2*>(b->qs + 32 * (g / 2) + 8 * (o % 4));
    int sc, mn;
    ggml::k4_scale_min(g, b->scales, sc, mn);
    return {{(q.x >> shift) & 0x0F0F0F0Fu, (q.y >> shift) & 0x0F0F0F0Fu},
            half_to_f32(b->d) * float(sc),
            -half_to_f32(b->dmin) * float(mn)};
  }
};

template <>
struct Octets<DType::Q5_K> {
  static constexpr int kElems = 256, kBytes = 176, kOffset = 0;
  static constexpr bool kSigned = false;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ5_K*>(p);
    const int g = o / 4, shift = 4 * (g % 2), l0 = 8 * (o % 4);
    const uint2 q = *reinterpret_cast<const uint2*>(b->qs + 32 * (g / 2) + l0);
    const uint2 h = *reinterpret_cast<const uint2*>(b->qh + l0);
    int sc, mn;
    ggml::k4_scale_min(g, b->scales, sc, mn);
    return {{((q.x >> shift) & 0x0F0F0F0Fu) | (((h.x >> g) & 0x01010101u) << 4),
             ((q.y >> shift) & 0x0F0F0F0Fu) | (((h.y >> g) & 0x01010101u) << 4)},
            half_to_f32(b->d) * float(sc),
            -half_to_f32(b->dmin) * float(mn)};
  }
};

template <>
struct Octets<DType::Q6_K> {
  static constexpr int kElems = 256, kBytes = 210, kOffset = 32;
  static constexpr bool kSigned = false;
  // Run r = g mod 4 of half n = g / 4: a nibble of ql, two bits of qh.
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockQ6_K*>(p);
    const int g = o / 4, n = g / 4, r = g % 4, l0 = 8 * (o % 4);
    const uint8_t* ql = b->ql + 64 * n + 32 * (r % 2) + l0;
    const uint8_t* qh = b->qh + 32 * n + l0;
    Octet out;
    for (int w = 0; w < 2; w++)
      out.lv[w] = ((word_at<false>(ql + 4 * w) >> (4 * (r / 2))) & 0x0F0F0F0Fu) |
                  (((word_at<false>(qh + 4 * w) >> (2 * r)) & 0x03030303u) << 4);
    out.s = half_to_f32(b->d) * float(b->scales[o / 2]);
    out.b = 0.f;
    return out;
  }
};

template <>
struct Octets<DType::IQ4_XS> {
  static constexpr int kElems = 256, kBytes = 136, kOffset = 0;
  static constexpr bool kSigned = true;
  __device__ static Octet get(const uint8_t* p, int o) {
    const auto* b = reinterpret_cast<const ggml::BlockIq4Xs*>(p);
    const int g = o / 4, l0 = 8 * (o % 4), shift = l0 < 16 ? 0 : 4;
    const uint2 q = *reinterpret_cast<const uint2*>(b->qs + 16 * g + (l0 % 16));
    return {{iq4_lookup((q.x >> shift) & 0x0F0F0F0Fu), iq4_lookup((q.y >> shift) & 0x0F0F0F0Fu)},
            half_to_f32(b->d) * float(ggml::iq4xs_scale(*b, g) - 32),
            0.f};
  }
};

// The 8 values of an octet in f32: s · (u − o) + b (levels signed or not as the type says).
template <DType T>
__device__ __forceinline__ void octet_values(const Octet& q, float (&v)[8]) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const uint32_t byte = (q.lv[i / 4] >> (8 * (i % 4))) & 0xFFu;
    const int u = Octets<T>::kSigned ? int(int8_t(byte)) : int(byte);
    v[i] = fmaf(q.s, float(u - Octets<T>::kOffset), q.b);
  }
}

// Calls f.template operator()<T>() with T the block dtype `t`: the launchers' dispatch.
template <class F>
void with_block_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Q4_0:
      f.template operator()<DType::Q4_0>();
      return;
    case DType::Q4_1:
      f.template operator()<DType::Q4_1>();
      return;
    case DType::Q5_0:
      f.template operator()<DType::Q5_0>();
      return;
    case DType::Q5_1:
      f.template operator()<DType::Q5_1>();
      return;
    case DType::Q8_0:
      f.template operator()<DType::Q8_0>();
      return;
    case DType::Q2_K:
      f.template operator()<DType::Q2_K>();
      return;
    case DType::Q3_K:
      f.template operator()<DType::Q3_K>();
      return;
    case DType::Q4_K:
      f.template operator()<DType::Q4_K>();
      return;
    case DType::Q5_K:
      f.template operator()<DType::Q5_K>();
      return;
    case DType::Q6_K:
      f.template operator()<DType::Q6_K>();
      return;
    case DType::IQ4_NL:
      f.template operator()<DType::IQ4_NL>();
      return;
    case DType::IQ4_XS:
      f.template operator()<DType::IQ4_XS>();
      return;
    default:
      return;
  }
}

}  // namespace tandem::cuda
