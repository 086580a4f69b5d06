// dequantize_row: ggml's dequantize_row_* arithmetic, type by type. Every value is computed
// with the products in ggml's order, each rounded to f32 once — this file is compiled with
// -ffp-contract=off (CMakeLists.txt), since a fused multiply-add would round once where ggml
// rounds twice and move some values by an ulp.
#include <cstring>

#include "core/block_quant.h"
#include "core/error.h"
#include "core/ggml_blocks.h"

namespace tandem {
namespace {

using namespace ggml;

float h(uint16_t v) {
  return f16_to_f32(v);
}

void q4_0(const BlockQ4_0& b, float* y) {
  const float d = h(b.d);
  for (int j = 0; j < 16; j++) {
    y[j] = float((b.qs[j] & 0xF) - 8) * d;
    y[j + 16] = float((b.qs[j] >> 4) - 8) * d;
  }
}

void q4_1(const BlockQ4_1& b, float* y) {
  const float d = h(b.d), m = h(b.m);
  for (int j = 0; j < 16; j++) {
    y[j] = float(b.qs[j] & 0xF) * d + m;
    y[j + 16] = float(b.qs[j] >> 4) * d + m;
  }
}

// The 5-bit values of a Q5_0 / Q5_1 block, 0..31.
void q5_values(const uint8_t* qh4, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  for (int j = 0; j < 16; j++) {
    q[j] = (qs[j] & 0xF) | int(((qh >> j) & 1) << 4);
    q[j + 16] = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
  }
}

void q5_0(const BlockQ5_0& b, float* y) {
  const float d = h(b.d);
  int q[32];
  q5_values(b.qh, b.qs, q);
  for (int j = 0; j < 32; j++) y[j] = float(q[j] - 16) * d;
}

void q5_1(const BlockQ5_1& b, float* y) {
  const float d = h(b.d), m = h(b.m);
  int q[32];
  q5_values(b.qh, b.qs, q);
  for (int j = 0; j < 32; j++) y[j] = float(q[j]) * d + m;
}

void q8_0(const BlockQ8_0& b, float* y) {
  const float d = h(b.d);
  for (int j = 0; j < 32; j++) y[j] = float(b.qs[j]) * d;
}

void q2_k(const BlockQ2_K& b, float* y) {
  const float d = h(b.d), dmin = h(b.dmin);
  for (int n = 0; n < 2; n++)
    for (int j = 0; j < 4; j++)
      for (int half = 0; half < 2; half++) {
        const uint8_t sc = b.scales[8 * n + 2 * j + half];
        const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
        for (int l = 0; l < 16; l++) {
          const int q = (b.qs[32 * n + 16 * half + l] >> (2 * j)) & 3;
          *y++ = dl * float(q) - ml;
        }
      }
}

void q3_k(const BlockQ3_K& b, float* y) {
  const float d = h(b.d);
  for (int n = 0; n < 2; n++)
    for (int j = 0; j < 4; j++)
      for (int half = 0; half < 2; half++) {
        const float dl = d * float(q3k_scale(b.scales, 8 * n + 2 * j + half) - 32);
        for (int l = 16 * half; l < 16 * half + 16; l++) {
          const int low = (b.qs[32 * n + l] >> (2 * j)) & 3;
          const bool high = (b.hmask[l] >> (4 * n + j)) & 1;
          *y++ = dl * float(low - (high ? 0 : 4));
        }
      }
}

void q4_k(const BlockQ4_K& b, float* y) {
  const float d = h(b.d), dmin = h(b.dmin);
  for (int g = 0; g < 8; g++) {
    int sc, mn;
    k4_scale_min(g, b.scales, sc, mn);
    const float dl = d * float(sc), ml = dmin * float(mn);
    const uint8_t* q = b.qs + 32 * (g / 2);
    for (int l = 0; l < 32; l++) *y++ = dl * float(g % 2 ? q[l] >> 4 : q[l] & 0xF) - ml;
  }
}

void q5_k(const BlockQ5_K& b, float* y) {
  const float d = h(b.d), dmin = h(b.dmin);
  for (int g = 0; g < 8; g++) {
    int sc, mn;
    k4_scale_min(g, b.scales, sc, mn);
    const float dl = d * float(sc), ml = dmin * float(mn);
    const uint8_t* q = b.qs + 32 * (g / 2);
    for (int l = 0; l < 32; l++) {
      const int low = g % 2 ? q[l] >> 4 : q[l] & 0xF;
      *y++ = dl * float(low + (((b.qh[l] >> g) & 1) << 4)) - ml;
    }
  }
}

void q6_k(const BlockQ6_K& b, float* y) {
  const float d = h(b.d);
  for (int n = 0; n < 2; n++) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    const int8_t* sc = b.scales + 8 * n;
    for (int l = 0; l < 32; l++) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[128 * n + l] = d * float(sc[is]) * float(q1);
      y[128 * n + l + 32] = d * float(sc[is + 2]) * float(q2);
      y[128 * n + l + 64] = d * float(sc[is + 4]) * float(q3);
      y[128 * n + l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

void iq4_nl(const BlockIq4Nl& b, float* y) {
  const float d = h(b.d);
  for (int j = 0; j < 16; j++) {
    y[j] = d * float(kIq4Values[b.qs[j] & 0xF]);
    y[j + 16] = d * float(kIq4Values[b.qs[j] >> 4]);
  }
}

void iq4_xs(const BlockIq4Xs& b, float* y) {
  const float d = h(b.d);
  for (int s = 0; s < 8; s++) {
    const float dl = d * float(iq4xs_scale(b, s) - 32);
    const uint8_t* qs = b.qs + 16 * s;
    for (int j = 0; j < 16; j++) {
      y[32 * s + j] = dl * float(kIq4Values[qs[j] & 0xF]);
      y[32 * s + j + 16] = dl * float(kIq4Values[qs[j] >> 4]);
    }
  }
}

// Calls decode(block, out) for each of the row's blocks of type B.
template <class B, class F>
void each_block(const void* blocks, float* out, int64_t k, int elems, F decode) {
  const auto* b = static_cast<const B*>(blocks);
  for (int64_t i = 0; i < k / elems; i++) decode(b[i], out + i * elems);
}

}  // namespace

void dequantize_row(DType type, const void* blocks, float* out, int64_t k) {
  const int elems = dtype_block(type).elems;
  TANDEM_CHECK(dtype_is_block(type) && k % elems == 0,
               "dequantize_row: {} values of {} (a block type's rows are whole blocks of {})", k,
               dtype_name(type), elems);
  switch (type) {
    case DType::Q4_0:
      return each_block<BlockQ4_0>(blocks, out, k, elems, q4_0);
    case DType::Q4_1:
      return each_block<BlockQ4_1>(blocks, out, k, elems, q4_1);
    case DType::Q5_0:
      return each_block<BlockQ5_0>(blocks, out, k, elems, q5_0);
    case DType::Q5_1:
      return each_block<BlockQ5_1>(blocks, out, k, elems, q5_1);
    case DType::Q8_0:
      return each_block<BlockQ8_0>(blocks, out, k, elems, q8_0);
    case DType::Q2_K:
      return each_block<BlockQ2_K>(blocks, out, k, elems, q2_k);
    case DType::Q3_K:
      return each_block<BlockQ3_K>(blocks, out, k, elems, q3_k);
    case DType::Q4_K:
      return each_block<BlockQ4_K>(blocks, out, k, elems, q4_k);
    case DType::Q5_K:
      return each_block<BlockQ5_K>(blocks, out, k, elems, q5_k);
    case DType::Q6_K:
      return each_block<BlockQ6_K>(blocks, out, k, elems, q6_k);
    case DType::IQ4_NL:
      return each_block<BlockIq4Nl>(blocks, out, k, elems, iq4_nl);
    case DType::IQ4_XS:
      return each_block<BlockIq4Xs>(blocks, out, k, elems, iq4_xs);
    default:
      break;
  }
  fail("dequantize_row: {} is not a block type", dtype_name(type));
}

}  // namespace tandem
