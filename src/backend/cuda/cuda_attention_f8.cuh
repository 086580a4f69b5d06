// Private to cuda_attention_decode_f8.cu: the warp math of one flash-decoding step over
// an e4m3 K/V tile read straight from its shared-memory stage and widened in registers.
//
// The products are transposed against the bf16 kernel's: keys (and head dims) take the
// mma's 16-row M, the 8 query heads of a CTA its N. GQA groups of 2-8 heads then waste
// at most half of N instead of 3/4 of M, and a warp's O accumulator is half as large.
//   Sᵀ = K·Qᵀ: A = K rows [key][dim], B = Qᵀ; C lane 4g + c: keys g, g+8 × heads 2c, 2c+1.
//   Oᵀ = Vᵀ·Pᵀ: A = Vᵀ [dim][key], B = Pᵀ (Sᵀ's C fragments, transposed in registers by
//   movmatrix); C lane 4g + c: dims (see below) × heads 2c, 2c+1.
// There is no 8-bit ldmatrix transpose on sm_90, so the tiles are read as b16 pairs of
// bytes and the mma's freedom to permute its reduction index (and Oᵀ's row index) is
// used instead:
//   K: ldmatrix of 8 keys × 16 bytes gives lane 4g + c the bytes 4c..4c+3 of key g:
//     k 2c, 2c+1 ← bytes 4c, 4c+1 and k 2c+8, 2c+9 ← 4c+2, 4c+3 of the 16-dim step, so
//     Q's B fragments are taken in that order (q_frags_f8); the dot product is unchanged.
//   V: ldmatrix.trans of 8 keys × 16 bytes gives lane 4g + c the dim pair (2g, 2g+1) of
//     keys 2c, 2c+1; one byte permute splits it into the even dim 2g (Oᵀ row g) and the
//     odd dim 2g+1 (row g + 8). So Oᵀ tile j holds dims 16j + 2g (c0, c1) and
//     16j + 2g + 1 (c2, c3) for heads 2c (c0, c2) and 2c + 1 (c1, c3).
// The mma runs in f16 (e4m3 is exact in f16; Q is clamped to f16's range; probabilities
// in [0, 1] keep more bits than in bf16), accumulating in f32.
//
// A stage holds BN K rows then BN V rows of RS bytes (RS = Dh + 16: the 8 rows of one
// ldmatrix fall on distinct banks).
#pragma once

#include "backend/cuda/cuda_attention.cuh"

namespace tandem::attn {

// bf16x2 -> f16x2, clamped to ±65504 (a query beyond f16's range saturates, never inf).
__device__ __forceinline__ uint32_t f16x2_from_bf16x2(uint32_t v) {
  float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  f.x = fminf(fmaxf(f.x, -65504.f), 65504.f);
  f.y = fminf(fmaxf(f.y, -65504.f), 65504.f);
  return pack_f16(f.x, f.y);
}

__device__ __forceinline__ uint32_t f16x2_lo(uint32_t f8x4) {
  return cuda::f16x2_from_f8x2(uint16_t(f8x4 & 0xffffu));
}
__device__ __forceinline__ uint32_t f16x2_hi(uint32_t f8x4) {
  return cuda::f16x2_from_f8x2(uint16_t(f8x4 >> 16));
}

// The 8x8 b16 matrix held in fragment a (lane 4g + c: row g, cols 2c, 2c+1), transposed.
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Qᵀ's B fragment (f16, the permuted k order above) of k16 step ks for head g of the 8
// Q rows in shared memory (bf16, row stride QS elements).
template <int QS>
__device__ __forceinline__ void q_frag_f8(uint32_t (&b)[2], const bf16* q, int ks, int lane) {
  const uint2 r = *reinterpret_cast<const uint2*>(q + (lane >> 2) * QS + 16 * ks + 4 * (lane & 3));
  b[0] = f16x2_from_bf16x2(r.x);
  b[1] = f16x2_from_bf16x2(r.y);
}

// ldmatrix lane offset (bytes from a 16-key slab's row 0) for x4 = (keys 0-7 | 8-15) x
// (16-byte chunks j | j + 1): regs 0, 1 chunk j; 2, 3 chunk j + 1.
__device__ __forceinline__ uint32_t lane_offset_f8(int lane, int rs) {
  return uint32_t(((lane & 7) + ((lane >> 3) & 1) * 8) * rs + (lane >> 4) * 16);
}

// Sᵀ = K·Qᵀ for GK keys (GK / 16 tiles) of an e4m3 tile and the CTA's 8 heads. Q from
// registers (qf) when Q_IN_REGS, else converted from shared memory (q) at each step.
template <int DH, int GK, int RS, int QS, bool Q_IN_REGS>
__device__ __forceinline__ void warp_kq_f8(float (&s)[GK / 16][4],
                                           const uint32_t (&qf)[Q_IN_REGS ? DH / 16 : 1][2],
                                           const bf16* q, uint32_t k_lane, int lane) {
  static_assert(DH % 32 == 0, "16-dim steps go in pairs");
#pragma unroll
  for (int mt = 0; mt < GK / 16; mt++) s[mt][0] = s[mt][1] = s[mt][2] = s[mt][3] = 0.f;
#pragma unroll
  for (int kp = 0; kp < DH / 32; kp++) {
    uint32_t b[2][2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      if constexpr (Q_IN_REGS) {
        b[h][0] = qf[2 * kp + h][0];
        b[h][1] = qf[2 * kp + h][1];
      } else {
        q_frag_f8<QS>(b[h], q, 2 * kp + h, lane);
      }
    }
#pragma unroll
    for (int mt = 0; mt < GK / 16; mt++) {
      uint32_t r[4];
      ldsm_x4(r, k_lane + uint32_t(mt * 16 * RS + kp * 32));
#pragma unroll
      for (int h = 0; h < 2; h++) {  // step 2·kp + h: keys 0-7 in r[2h], 8-15 in r[2h + 1]
        const uint32_t a[4] = {f16x2_lo(r[2 * h]), f16x2_lo(r[2 * h + 1]), f16x2_hi(r[2 * h]),
                               f16x2_hi(r[2 * h + 1])};
        mma_f16(s[mt], a, b[h][0], b[h][1]);
      }
    }
  }
}

// Oᵀ += Vᵀ·Pᵀ over GK keys for MT tiles of 16 dims starting at v_lane's column; p holds
// the probabilities in Sᵀ's layout.
template <int GK, int MT, int RS>
__device__ __forceinline__ void warp_vp_f8(float (&o)[MT][4], const float (&p)[GK / 16][4],
                                           uint32_t v_lane) {
  static_assert(MT % 2 == 0, "16-dim chunks go in pairs");
#pragma unroll
  for (int kk = 0; kk < GK / 16; kk++) {
    const uint32_t b0 = transpose_8x8(pack_f16(p[kk][0], p[kk][1]));  // keys 2c, 2c+1; head g
    const uint32_t b1 = transpose_8x8(pack_f16(p[kk][2], p[kk][3]));  // keys 2c+8, 2c+9
    const uint32_t row = v_lane + uint32_t(kk * 16 * RS);
#pragma unroll
    for (int jp = 0; jp < MT / 2; jp++) {
      uint32_t r[4];
      ldsm_x4_trans(r, row + jp * 32);
#pragma unroll
      for (int h = 0; h < 2; h++) {  // chunk 2·jp + h: keys 0-7 in r[2h], 8-15 in r[2h + 1]
        const uint32_t x = __byte_perm(r[2 * h], 0, 0x3120);  // even dim | odd dim
        const uint32_t y = __byte_perm(r[2 * h + 1], 0, 0x3120);
        const uint32_t a[4] = {f16x2_lo(x), f16x2_hi(x), f16x2_lo(y), f16x2_hi(y)};
        mma_f16(o[2 * jp + h], a, b0, b1);
      }
    }
  }
}

}  // namespace tandem::attn
