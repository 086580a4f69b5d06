// quantize_row: a plain encoder per block type (see block_quant.h). Each block is scaled to
// its own range and every value rounded to the nearest level; the k-quants' sub-block scales
// are themselves rounded to their 4/6/8 bits against the block's f16 super-scale, and the
// values are then rounded against the scales as stored, so decoding gives the nearest level
// the stored scales allow.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/block_quant.h"
#include "core/error.h"
#include "core/ggml_blocks.h"

namespace tandem {
namespace {

using namespace ggml;

uint16_t f16(float v) {
  return f32_to_f16(v);
}
float h(uint16_t v) {
  return f16_to_f32(v);
}

int clamp_round(float v, int lo, int hi) {
  return std::clamp(int(std::lround(v)), lo, hi);
}

// The value of largest magnitude, with its sign.
float signed_max(const float* x, int n) {
  float m = 0.f;
  for (int i = 0; i < n; i++)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  return m;
}

// A symmetric block: v ≈ d·(q − bias), q in [0, 2·bias); d from the signed max so that the
// largest value lands exactly on the end level (−bias).
void symmetric(const float* x, int n, int bias, uint16_t& d16, int* q) {
  const float d = h(f16(signed_max(x, n) / float(-bias)));
  d16 = f16(d);
  for (int i = 0; i < n; i++)
    q[i] = d == 0.f ? bias : clamp_round(x[i] / d, -bias, bias - 1) + bias;
}

// An affine block: v ≈ d·q + m, q in [0, levels − 1].
void affine(const float* x, int n, int levels, uint16_t& d16, uint16_t& m16, int* q) {
  const float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  const float d = h(f16((hi - lo) / float(levels - 1))), m = h(f16(lo));
  d16 = f16(d);
  m16 = f16(m);
  for (int i = 0; i < n; i++) q[i] = d == 0.f ? 0 : clamp_round((x[i] - m) / d, 0, levels - 1);
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; j++) qs[j] = uint8_t((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

void pack_q5_high(const int* q, uint8_t* qh4) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; j++) qh |= uint32_t((q[j] >> 4) & 1) << j;
  std::memcpy(qh4, &qh, 4);
}

void q4_0(const float* x, BlockQ4_0& b) {
  int q[32];
  symmetric(x, 32, 8, b.d, q);
  pack_nibbles(q, b.qs);
}

void q4_1(const float* x, BlockQ4_1& b) {
  int q[32];
  affine(x, 32, 16, b.d, b.m, q);
  pack_nibbles(q, b.qs);
}

void q5_0(const float* x, BlockQ5_0& b) {
  int q[32];
  symmetric(x, 32, 16, b.d, q);
  pack_nibbles(q, b.qs);
  pack_q5_high(q, b.qh);
}

void q5_1(const float* x, BlockQ5_1& b) {
  int q[32];
  affine(x, 32, 32, b.d, b.m, q);
  pack_nibbles(q, b.qs);
  pack_q5_high(q, b.qh);
}

void q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.f;
  for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[i]));
  const float d = h(f16(amax / 127.f));
  b.d = f16(d);
  for (int i = 0; i < 32; i++) b.qs[i] = int8_t(d == 0.f ? 0 : clamp_round(x[i] / d, -127, 127));
}

// Sub-block scales and mins of an affine k-quant: for each sub-block of `len` values, the
// scale (max − min) / (levels − 1) and the min's magnitude (mins above 0 clamp to 0, as the
// blocks store −min ≥ 0), quantized to `bits` against super-scales d and dmin.
struct AffineScales {
  float d = 0.f, dmin = 0.f;
  int sc[16] = {}, mn[16] = {};
};

AffineScales affine_scales(const float* x, int subs, int len, int levels, int bits) {
  float scale[16], mins[16], max_scale = 0.f, max_min = 0.f;
  for (int s = 0; s < subs; s++) {
    const float* v = x + s * len;
    const float lo = std::min(0.f, *std::min_element(v, v + len));
    const float hi = *std::max_element(v, v + len);
    scale[s] = std::max(0.f, hi - lo) / float(levels - 1);
    mins[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, mins[s]);
  }
  const int top = (1 << bits) - 1;
  AffineScales a;
  a.d = h(f16(max_scale / float(top)));
  a.dmin = h(f16(max_min / float(top)));
  for (int s = 0; s < subs; s++) {
    a.sc[s] = a.d == 0.f ? 0 : clamp_round(scale[s] / a.d, 0, top);
    a.mn[s] = a.dmin == 0.f ? 0 : clamp_round(mins[s] / a.dmin, 0, top);
  }
  return a;
}

// q for v ≈ (d·sc)·q − dmin·mn, q in [0, levels − 1].
int affine_level(float v, const AffineScales& a, int s, int levels) {
  const float dl = a.d * float(a.sc[s]), ml = a.dmin * float(a.mn[s]);
  return dl == 0.f ? 0 : clamp_round((v + ml) / dl, 0, levels - 1);
}

void q2_k(const float* x, BlockQ2_K& b) {
  const AffineScales a = affine_scales(x, 16, 16, 4, 4);
  b.d = f16(a.d);
  b.dmin = f16(a.dmin);
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int s = 0; s < 16; s++) b.scales[s] = uint8_t(a.sc[s] | (a.mn[s] << 4));
  for (int i = 0; i < 256; i++) {
    const int n = i / 128, j = (i % 128) / 32, l = i % 32;
    b.qs[32 * n + l] |= uint8_t(affine_level(x[i], a, i / 16, 4) << (2 * j));
  }
}

// Signed sub-block scales of a symmetric k-quant: scale s = signed max / −bias per sub-block,
// as an integer in [−lim, lim] times the super-scale d.
void signed_scales(const float* x, int subs, int len, int bias, int lim, float& d, int* ls) {
  float scale[16], max_abs = 0.f, max_signed = 0.f;
  for (int s = 0; s < subs; s++) {
    scale[s] = signed_max(x + s * len, len) / float(-bias);
    if (std::fabs(scale[s]) > max_abs) max_abs = std::fabs(scale[s]), max_signed = scale[s];
  }
  d = h(f16(max_signed / float(-lim)));
  for (int s = 0; s < subs; s++) ls[s] = d == 0.f ? 0 : clamp_round(scale[s] / d, -lim, lim);
}

void q3_k(const float* x, BlockQ3_K& b) {
  float d;
  int ls[16];
  signed_scales(x, 16, 16, 4, 32, d, ls);
  b.d = f16(d);
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int i = 0; i < 16; i++) {  // q3k_scale's layout, stored as ls + 32 (ls = 32 clamps to 31)
    const int v = std::min(ls[i] + 32, 63);
    b.scales[i % 8] |= uint8_t((v & 0xF) << (i < 8 ? 0 : 4));
    b.scales[8 + (i & 3)] |= uint8_t((v >> 4) << (2 * (i >> 2)));
  }
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int i = 0; i < 256; i++) {
    const float dl = d * float(q3k_scale(b.scales, i / 16) - 32);
    const int u = dl == 0.f ? 4 : clamp_round(x[i] / dl, -4, 3) + 4;  // 0..7
    const int n = i / 128, j = (i % 128) / 32, l = i % 32;
    b.qs[32 * n + l] |= uint8_t((u & 3) << (2 * j));
    b.hmask[l] |= uint8_t((u >> 2) << (4 * n + j));
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins (k4_scale_min's layout).
void pack_k4_scales(const AffineScales& a, uint8_t* q) {
  for (int j = 0; j < 4; j++) {
    q[j] = uint8_t(a.sc[j] | ((a.sc[j + 4] >> 4) << 6));
    q[j + 4] = uint8_t(a.mn[j] | ((a.mn[j + 4] >> 4) << 6));
    q[j + 8] = uint8_t((a.sc[j + 4] & 0xF) | ((a.mn[j + 4] & 0xF) << 4));
  }
}

void q4_k(const float* x, BlockQ4_K& b) {
  const AffineScales a = affine_scales(x, 8, 32, 16, 6);
  b.d = f16(a.d);
  b.dmin = f16(a.dmin);
  pack_k4_scales(a, b.scales);
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int i = 0; i < 256; i++) {
    const int g = i / 32;
    b.qs[32 * (g / 2) + i % 32] |= uint8_t(affine_level(x[i], a, g, 16) << (4 * (g % 2)));
  }
}

void q5_k(const float* x, BlockQ5_K& b) {
  const AffineScales a = affine_scales(x, 8, 32, 32, 6);
  b.d = f16(a.d);
  b.dmin = f16(a.dmin);
  pack_k4_scales(a, b.scales);
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < 256; i++) {
    const int g = i / 32, q = affine_level(x[i], a, g, 32);
    b.qs[32 * (g / 2) + i % 32] |= uint8_t((q & 0xF) << (4 * (g % 2)));
    b.qh[i % 32] |= uint8_t((q >> 4) << g);
  }
}

void q6_k(const float* x, BlockQ6_K& b) {
  float d;
  int ls[16];
  signed_scales(x, 16, 16, 32, 127, d, ls);
  b.d = f16(d);
  for (int s = 0; s < 16; s++) b.scales[s] = int8_t(ls[s]);
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < 256; i++) {
    const float dl = d * float(b.scales[i / 16]);
    const int u = dl == 0.f ? 32 : clamp_round(x[i] / dl, -32, 31) + 32;  // 0..63
    const int n = i / 128, r = (i % 128) / 32, l = i % 32;  // run r of 32 within half n
    b.ql[64 * n + 32 * (r % 2) + l] |= uint8_t((u & 0xF) << (4 * (r / 2)));
    b.qh[32 * n + l] |= uint8_t((u >> 4) << (2 * r));
  }
}

// The index of the IQ4 value nearest v / d.
int iq4_index(float v, float d) {
  if (d == 0.f) return 8;  // kIq4Values[8] = 1: the level nearest 0 but for −10
  const float t = v / d;
  int best = 0;
  for (int i = 1; i < 16; i++)
    if (std::fabs(float(kIq4Values[i]) - t) < std::fabs(float(kIq4Values[best]) - t)) best = i;
  return best;
}

void iq4_nl(const float* x, BlockIq4Nl& b) {
  const float d = h(f16(signed_max(x, 32) / float(kIq4Values[0])));
  b.d = f16(d);
  int q[32];
  for (int i = 0; i < 32; i++) q[i] = iq4_index(x[i], d);
  pack_nibbles(q, b.qs);
}

void iq4_xs(const float* x, BlockIq4Xs& b) {
  float scale[8], max_abs = 0.f, max_signed = 0.f;
  for (int s = 0; s < 8; s++) {
    scale[s] = signed_max(x + 32 * s, 32) / float(kIq4Values[0]);
    if (std::fabs(scale[s]) > max_abs) max_abs = std::fabs(scale[s]), max_signed = scale[s];
  }
  const float d = h(f16(max_signed / -32.f));
  b.d = f16(d);
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof(b.scales_l));
  for (int s = 0; s < 8; s++) {
    const int ls = (d == 0.f ? 0 : clamp_round(scale[s] / d, -32, 31)) + 32;
    b.scales_l[s / 2] |= uint8_t((ls & 0xF) << (4 * (s % 2)));
    b.scales_h = uint16_t(b.scales_h | ((ls >> 4) << (2 * s)));
  }
  for (int s = 0; s < 8; s++) {
    const float dl = d * float(iq4xs_scale(b, s) - 32);
    int q[32];
    for (int i = 0; i < 32; i++) q[i] = iq4_index(x[32 * s + i], dl);
    pack_nibbles(q, b.qs + 16 * s);
  }
}

template <class B, class F>
void each_block(const float* x, void* blocks, int64_t k, int elems, F encode) {
  auto* b = static_cast<B*>(blocks);
  for (int64_t i = 0; i < k / elems; i++) encode(x + i * elems, b[i]);
}

}  // namespace

void quantize_row(DType type, const float* x, void* blocks, int64_t k) {
  const int elems = dtype_block(type).elems;
  TANDEM_CHECK(dtype_is_block(type) && k % elems == 0,
               "quantize_row: {} values as {} (a block type's rows are whole blocks of {})", k,
               dtype_name(type), elems);
  for (int64_t i = 0; i < k; i++)
    TANDEM_CHECK(std::isfinite(x[i]), "quantize_row: value {} at {} is not finite", x[i], i);
  switch (type) {
    case DType::Q4_0:
      return each_block<BlockQ4_0>(x, blocks, k, elems, q4_0);
    case DType::Q4_1:
      return each_block<BlockQ4_1>(x, blocks, k, elems, q4_1);
    case DType::Q5_0:
      return each_block<BlockQ5_0>(x, blocks, k, elems, q5_0);
    case DType::Q5_1:
      return each_block<BlockQ5_1>(x, blocks, k, elems, q5_1);
    case DType::Q8_0:
      return each_block<BlockQ8_0>(x, blocks, k, elems, q8_0);
    case DType::Q2_K:
      return each_block<BlockQ2_K>(x, blocks, k, elems, q2_k);
    case DType::Q3_K:
      return each_block<BlockQ3_K>(x, blocks, k, elems, q3_k);
    case DType::Q4_K:
      return each_block<BlockQ4_K>(x, blocks, k, elems, q4_k);
    case DType::Q5_K:
      return each_block<BlockQ5_K>(x, blocks, k, elems, q5_k);
    case DType::Q6_K:
      return each_block<BlockQ6_K>(x, blocks, k, elems, q6_k);
    case DType::IQ4_NL:
      return each_block<BlockIq4Nl>(x, blocks, k, elems, iq4_nl);
    case DType::IQ4_XS:
      return each_block<BlockIq4Xs>(x, blocks, k, elems, iq4_xs);
    default:
      break;
  }
  fail("quantize_row: {} is not a block type", dtype_name(type));
}

}  // namespace tandem
