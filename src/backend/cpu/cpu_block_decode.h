// Every ggml block type in one shape, for the kernels of cpu_block_kernels.h: a block of E
// values (32 or 256) is its groups of 32 levels u (unsigned bytes, in k order) and, per run
// of 16 values h, an integer scale sc_h and min mn_h under the block's f32 scales d and dm:
//     value = d·sc_h·(u − o) + dm·mn_h            (o: the type's offset)
// which is, rounded as ggml rounds it (dequantize_row), fl(fl(s_h·(u − o)) + b_h) with
// s_h = fl(d·sc_h) and b_h = fl(dm·mn_h) (no b for types without a min). Examples: Q4_K has
// sc = its 6-bit scale, dm = −dmin, mn = its 6-bit min, o = 0; Q6_K has sc = its int8 scale,
// o = 32; Q8_0 has sc = 1, o = 128 (u = q + 128).
//
// Include only from the per-ISA kernel files: everything is in an anonymous namespace and
// written with AVX2 (256-bit) intrinsics, which the AVX-512 files use as well.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_block_kernels.h"
#include "core/ggml_blocks.h"

namespace tandem::cpu {
namespace {

using namespace ggml;

// A block's scales: d, dm and the per-16 sc, mn (the first E / 16 of them).
struct BlockHead {
  float d = 0.f, dm = 0.f;
  int32_t sc[16], mn[16];
};

inline float half_at(const uint16_t& h) {
  return _cvtsh_ss(h);
}

// [low nibbles of the 16 bytes at qs | their high nibbles]: a 32-value block's 4-bit levels.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0xF);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

// Byte j = 0x10 where bit j of `bits` is set, else 0.
inline __m256i bits_as_0x10(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(bits)), spread);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

// (the 32 bytes at p >> shift) & mask, per byte.
inline __m256i shifted(const uint8_t* p, int shift, int mask) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(char(mask)));
}

// The IQ4 levels as u = value + 128 of 4-bit indices.
inline __m256i iq4_levels(const uint8_t* qs) {
  const __m128i table =
      _mm_setr_epi8(char(-127 ^ 0x80), char(-104 ^ 0x80), char(-83 ^ 0x80), char(-65 ^ 0x80),
                    char(-49 ^ 0x80), char(-35 ^ 0x80), char(-22 ^ 0x80), char(-10 ^ 0x80),
                    char(1 ^ 0x80), char(13 ^ 0x80), char(25 ^ 0x80), char(38 ^ 0x80),
                    char(53 ^ 0x80), char(69 ^ 0x80), char(89 ^ 0x80), char(113 ^ 0x80));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), nibbles(qs));
}

inline void ones(BlockHead& h, int n) {
  for (int i = 0; i < n; i++) h.sc[i] = 1, h.mn[i] = 1;
}

// Block<K>: kElems, kBytes, kOffset, kHasMin, head(block, h), levels(block, g) for group g.
template <BlockKind K>
struct Block;

template <>
struct Block<BlockKind::Q4_0> {
  static constexpr int kElems = 32, kBytes = 18, kOffset = 8;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    h.d = half_at(reinterpret_cast<const BlockQ4_0*>(p)->d);
    ones(h, 2);
  }
  static __m256i levels(const uint8_t* p, int) {
    return nibbles(reinterpret_cast<const BlockQ4_0*>(p)->qs);
  }
};

template <>
struct Block<BlockKind::Q4_1> {
  static constexpr int kElems = 32, kBytes = 20, kOffset = 0;
  static constexpr bool kHasMin = true;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
    h.d = half_at(b->d);
    h.dm = half_at(b->m);
    ones(h, 2);
  }
  static __m256i levels(const uint8_t* p, int) {
    return nibbles(reinterpret_cast<const BlockQ4_1*>(p)->qs);
  }
};

inline __m256i q5_levels(const uint8_t* qh4, const uint8_t* qs) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  return _mm256_or_si256(nibbles(qs), bits_as_0x10(qh));
}

template <>
struct Block<BlockKind::Q5_0> {
  static constexpr int kElems = 32, kBytes = 22, kOffset = 16;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    h.d = half_at(reinterpret_cast<const BlockQ5_0*>(p)->d);
    ones(h, 2);
  }
  static __m256i levels(const uint8_t* p, int) {
    const auto* b = reinterpret_cast<const BlockQ5_0*>(p);
    return q5_levels(b->qh, b->qs);
  }
};

template <>
struct Block<BlockKind::Q5_1> {
  static constexpr int kElems = 32, kBytes = 24, kOffset = 0;
  static constexpr bool kHasMin = true;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(p);
    h.d = half_at(b->d);
    h.dm = half_at(b->m);
    ones(h, 2);
  }
  static __m256i levels(const uint8_t* p, int) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(p);
    return q5_levels(b->qh, b->qs);
  }
};

template <>
struct Block<BlockKind::Q8_0> {
  static constexpr int kElems = 32, kBytes = 34, kOffset = 128;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    h.d = half_at(reinterpret_cast<const BlockQ8_0*>(p)->d);
    ones(h, 2);
  }
  static __m256i levels(const uint8_t* p, int) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    return _mm256_xor_si256(q, _mm256_set1_epi8(char(0x80)));
  }
};

template <>
struct Block<BlockKind::IQ4_NL> {
  static constexpr int kElems = 32, kBytes = 18, kOffset = 128;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    h.d = half_at(reinterpret_cast<const BlockIq4Nl*>(p)->d);
    ones(h, 2);
  }
  static __m256i levels(const uint8_t* p, int) {
    return iq4_levels(reinterpret_cast<const BlockIq4Nl*>(p)->qs);
  }
};

// Group g of a Q2_K / Q3_K block: half n = g / 4 of qs, shifted by 2·(g mod 4).
template <>
struct Block<BlockKind::Q2_K> {
  static constexpr int kElems = 256, kBytes = 84, kOffset = 0;
  static constexpr bool kHasMin = true;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(p);
    h.d = half_at(b->d);
    h.dm = -half_at(b->dmin);
    for (int s = 0; s < 16; s++) h.sc[s] = b->scales[s] & 0xF, h.mn[s] = b->scales[s] >> 4;
  }
  static __m256i levels(const uint8_t* p, int g) {
    return shifted(reinterpret_cast<const BlockQ2_K*>(p)->qs + 32 * (g / 4), 2 * (g % 4), 3);
  }
};

template <>
struct Block<BlockKind::Q3_K> {
  static constexpr int kElems = 256, kBytes = 110, kOffset = 4;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(p);
    h.d = half_at(b->d);
    for (int s = 0; s < 16; s++) h.sc[s] = q3k_scale(b->scales, s) - 32;
  }
  // u = low 2 bits | high bit << 2, so u − 4 is ggml's low − (high ? 0 : 4).
  static __m256i levels(const uint8_t* p, int g) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(p);
    const __m256i low = shifted(b->qs + 32 * (g / 4), 2 * (g % 4), 3);
    const __m256i high = shifted(b->hmask, 4 * (g / 4) + g % 4, 1);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
  }
};

inline void k4_head(const uint8_t* scales, uint16_t d, uint16_t dmin, BlockHead& h) {
  h.d = half_at(d);
  h.dm = -half_at(dmin);
  for (int g = 0; g < 8; g++) {
    int sc, mn;
    k4_scale_min(g, scales, sc, mn);
    h.sc[2 * g] = h.sc[2 * g + 1] = sc;
    h.mn[2 * g] = h.mn[2 * g + 1] = mn;
  }
}

template <>
struct Block<BlockKind::Q4_K> {
  static constexpr int kElems = 256, kBytes = 144, kOffset = 0;
  static constexpr bool kHasMin = true;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(p);
    k4_head(b->scales, b->d, b->dmin, h);
  }
  static __m256i levels(const uint8_t* p, int g) {
    return shifted(reinterpret_cast<const BlockQ4_K*>(p)->qs + 32 * (g / 2), 4 * (g % 2), 0xF);
  }
};

template <>
struct Block<BlockKind::Q5_K> {
  static constexpr int kElems = 256, kBytes = 176, kOffset = 0;
  static constexpr bool kHasMin = true;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(p);
    k4_head(b->scales, b->d, b->dmin, h);
  }
  static __m256i levels(const uint8_t* p, int g) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(p);
    const __m256i low = shifted(b->qs + 32 * (g / 2), 4 * (g % 2), 0xF);
    return _mm256_or_si256(low, _mm256_slli_epi16(shifted(b->qh, g, 1), 4));
  }
};

template <>
struct Block<BlockKind::Q6_K> {
  static constexpr int kElems = 256, kBytes = 210, kOffset = 32;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
    h.d = half_at(b->d);
    for (int s = 0; s < 16; s++) h.sc[s] = b->scales[s];
  }
  // Run r = g mod 4 of half n = g / 4: a nibble of ql, two bits of qh.
  static __m256i levels(const uint8_t* p, int g) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
    const int n = g / 4, r = g % 4;
    const __m256i low = shifted(b->ql + 64 * n + 32 * (r % 2), 4 * (r / 2), 0xF);
    const __m256i high = shifted(b->qh + 32 * n, 2 * r, 3);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
};

template <>
struct Block<BlockKind::IQ4_XS> {
  static constexpr int kElems = 256, kBytes = 136, kOffset = 128;
  static constexpr bool kHasMin = false;
  static void head(const uint8_t* p, BlockHead& h) {
    const auto* b = reinterpret_cast<const BlockIq4Xs*>(p);
    h.d = half_at(b->d);
    for (int s = 0; s < 8; s++) h.sc[2 * s] = h.sc[2 * s + 1] = iq4xs_scale(*b, s) - 32;
  }
  static __m256i levels(const uint8_t* p, int g) {
    return iq4_levels(reinterpret_cast<const BlockIq4Xs*>(p)->qs + 16 * g);
  }
};

// Calls f.template operator()<K>() for the kind, once per call: the kernels' dispatch.
template <class F>
void with_kind(BlockKind kind, F&& f) {
  switch (kind) {
    case BlockKind::Q4_0:
      return f.template operator()<BlockKind::Q4_0>();
    case BlockKind::Q4_1:
      return f.template operator()<BlockKind::Q4_1>();
    case BlockKind::Q5_0:
      return f.template operator()<BlockKind::Q5_0>();
    case BlockKind::Q5_1:
      return f.template operator()<BlockKind::Q5_1>();
    case BlockKind::Q8_0:
      return f.template operator()<BlockKind::Q8_0>();
    case BlockKind::Q2_K:
      return f.template operator()<BlockKind::Q2_K>();
    case BlockKind::Q3_K:
      return f.template operator()<BlockKind::Q3_K>();
    case BlockKind::Q4_K:
      return f.template operator()<BlockKind::Q4_K>();
    case BlockKind::Q5_K:
      return f.template operator()<BlockKind::Q5_K>();
    case BlockKind::Q6_K:
      return f.template operator()<BlockKind::Q6_K>();
    case BlockKind::IQ4_NL:
      return f.template operator()<BlockKind::IQ4_NL>();
    case BlockKind::IQ4_XS:
      return f.template operator()<BlockKind::IQ4_XS>();
  }
}

}  // namespace
}  // namespace tandem::cpu
