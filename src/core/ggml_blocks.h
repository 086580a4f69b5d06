// ggml's (GGUF's) quantized weight blocks, byte for byte as llama.cpp lays them out, and the
// small pieces of their decoding that every implementation shares: the packed sub-block
// scales of the k-quants and the IQ4 value table. Plain structs and constexpr helpers, so the
// CPU kernels and the CUDA kernels include the same definitions (TANDEM_HD marks what runs on
// both; the helpers are static, so a kernel file compiled for a wider instruction set keeps its
// own copies and never lends them to the baseline code). A row of K values is K / elems blocks back
// to back (DType's dtype_block); blocks of 18, 22, 34, 110 or 210 bytes are only 2-byte aligned, so
// every field is at most 2 bytes.
//
// What each block means (the exact arithmetic is dequantize_row, core/block_quant.h):
//   Q4_0  v = d·(q − 8), q 4 bits             Q4_1  v = d·q + m
//   Q5_0  v = d·(q − 16), q 5 bits            Q5_1  v = d·q + m
//   Q8_0  v = d·q, q int8
//   Q2_K  256 values in 16 sub-blocks of 16: v = (d·sc)·q − dmin·mn, 4-bit sc and mn, q 2 bits
//   Q3_K  v = (d·(sc − 32))·(q − 4), 6-bit sc per 16, q 3 bits (2 low + 1 in hmask)
//   Q4_K  8 sub-blocks of 32: v = (d·sc)·q − dmin·mn, 6-bit sc and mn, q 4 bits
//   Q5_K  as Q4_K with q 5 bits (the 5th in qh)
//   Q6_K  v = (d·sc)·(q − 32), int8 sc per 16, q 6 bits (4 low in ql, 2 high in qh)
//   IQ4_NL v = d·kIq4Values[q], q 4 bits      IQ4_XS  v = (d·(ls − 32))·kIq4Values[q], 6-bit ls per
//   32
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif

namespace tandem::ggml {

constexpr int kQK = 256;  // values per k-quant super-block (ggml's QK_K)

struct BlockQ4_0 {
  uint16_t d;      // f16
  uint8_t qs[16];  // value j in the low nibble of qs[j], value j + 16 in its high nibble
};
struct BlockQ4_1 {
  uint16_t d, m;  // f16
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j: the 5th bit of value j (little-endian u32)
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ2_K {
  uint8_t scales[16];  // sub-block s: sc = low nibble, mn = high nibble
  uint8_t qs[64];      // half n, shift j: values 128n + 32j + l from qs[32n + l] >> 2j
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];   // bit 4n + j of hmask[l]: the high bit of value 128n + 32j + l
  uint8_t qs[64];      // low 2 bits, laid out as Q2_K's
  uint8_t scales[12];  // 16 6-bit scales (q3k_scale)
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 6-bit scales and mins (k4_scale_min)
  uint8_t qs[128];     // sub-blocks 2p, 2p+1: low and high nibbles of qs[32p + l]
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // bit g of qh[l]: the 5th bit of value 32g + l
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];    // half n: values 128n + l (+32) in the low nibbles of ql[64n + l (+32)],
  uint8_t qh[64];     //   values 128n + 64 + l (+32) in their high nibbles; 2 high bits each in
  int8_t scales[16];  //   qh[32n + l] at shifts 0, 2, 4, 6 for the four runs of 32
  uint16_t d;
};
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];  // as Q4_0: indices into kIq4Values
};
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;    // 2 high bits of ls for each sub-block of 32
  uint8_t scales_l[4];  // 4 low bits of ls, two sub-blocks a byte
  uint8_t qs[128];      // sub-block b: as one IQ4_NL block in qs[16b, 16b + 16)
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
                  sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ2_K) == 84 &&
                  sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 &&
                  sizeof(BlockIq4Nl) == 18 && sizeof(BlockIq4Xs) == 136,
              "ggml block sizes");

// IQ4_NL / IQ4_XS: the 16 values a 4-bit index stands for.
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes: j < 4
// in the low 6 bits of bytes j and j + 4; j >= 4 in the nibbles of byte j + 4 with their 2
// high bits in the top bits of bytes j − 4 and j.
TANDEM_HD static inline void k4_scale_min(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q3_K: the 6-bit scale (0..63, used as sc − 32) of sub-block i (0..15): its 4 low bits are
// the low (i < 8) or high nibble of byte i mod 8, its 2 high bits are bits 2⌊i/4⌋ of byte
// 8 + i mod 4.
TANDEM_HD static inline int q3k_scale(const uint8_t* s, int i) {
  const int low = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
  const int high = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
  return low | (high << 4);
}

// IQ4_XS: the 6-bit scale (used as ls − 32) of sub-block b (0..7).
TANDEM_HD static inline int iq4xs_scale(const BlockIq4Xs& x, int b) {
  return ((x.scales_l[b / 2] >> (4 * (b % 2))) & 0xF) | (((x.scales_h >> (2 * b)) & 3) << 4);
}

}  // namespace tandem::ggml
