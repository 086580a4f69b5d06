// Private to cuda_attention_decode.cu: the warp math of one flash-decoding step over an
// e4m3 K/V tile read straight from its shared-memory stage, widened in registers.
//
// There is no 8-bit ldmatrix transpose on sm_90, so the tile's bytes are read as b16
// pairs and the mma's freedom to permute its reduction index is used instead:
//   Q·Kᵀ: ldmatrix (no transpose) of 8 keys × 16 bytes gives lane 4·g + c the bytes
//     4c..4c+3 of key g; they are the B fragment of one k16 step (k 2c, 2c+1 ← bytes
//     4c, 4c+1; k 2c+8, 2c+9 ← 4c+2, 4c+3), so Q's A fragments are taken in the same
//     order (q_frags_f8): the dot product is unchanged.
//   P·V: ldmatrix.trans of 8 keys × 16 bytes gives lane 4·g + c, as b16 elements, the
//     dim pair (2g, 2g+1) of keys 2c and 2c+1. One byte permute splits it into the
//     B fragments of two n8 tiles: the even dims 2g and the odd dims 2g+1. So o[2j]
//     holds the even columns and o[2j+1] the odd columns of the 16-dim chunk j: lane c
//     holds columns 16j + 4c + {0, 1, 2, 3} as (o[2j][0], o[2j+1][0], o[2j][1],
//     o[2j+1][1]) for row g (and [2], [3] for row g + 8).
// The mma runs in f16 (e4m3 is exact in f16; Q is clamped to f16's range; probabilities
// in [0, 1] keep more bits than in bf16), accumulating in f32.
//
// A stage holds BN K rows then BN V rows of RS bytes (RS = Dh + 16: ldmatrix rows of one
// 8x8 matrix fall on distinct banks).
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

// A fragment (f16, the permuted k order above) of k16 step ks for rows g and g + 8 of
// the 16 Q rows in shared memory (bf16, row stride ST elements).
template <int ST>
__device__ __forceinline__ void q_frag_f8(uint32_t (&a)[4], const bf16* q, int ks, int lane) {
  const int g = lane >> 2, c = lane & 3;
  const uint2 r0 = *reinterpret_cast<const uint2*>(q + g * ST + 16 * ks + 4 * c);
  const uint2 r1 = *reinterpret_cast<const uint2*>(q + (g + 8) * ST + 16 * ks + 4 * c);
  a[0] = f16x2_from_bf16x2(r0.x);
  a[1] = f16x2_from_bf16x2(r1.x);
  a[2] = f16x2_from_bf16x2(r0.y);
  a[3] = f16x2_from_bf16x2(r1.y);
}

template <int DH, int ST>
__device__ __forceinline__ void load_q_frags_f8(uint32_t (&qf)[DH / 16][4], const bf16* q,
                                                int lane) {
#pragma unroll
  for (int ks = 0; ks < DH / 16; ks++) q_frag_f8<ST>(qf[ks], q, ks, lane);
}

// ldmatrix lane offsets (bytes from the tile's row 0) for a stage of row stride RS.
// K, x4 = (keys 0-7 | 8-15) x (k16 steps ks | ks + 1): regs 0, 1 key tile 0; 2, 3 tile 1.
__device__ __forceinline__ uint32_t k_lane_offset_f8(int lane, int rs) {
  return uint32_t(((lane & 7) + ((lane >> 4) & 1) * 8) * rs + ((lane >> 3) & 1) * 16);
}
// V, x4 transposed = (keys 0-7 | 8-15) x (16-dim chunks j | j + 1).
__device__ __forceinline__ uint32_t v_lane_offset_f8(int lane, int rs) {
  return uint32_t(((lane & 7) + ((lane >> 3) & 1) * 8) * rs + (lane >> 4) * 16);
}

// s = Q·Kᵀ for 16 rows and BN keys of an e4m3 tile. Q from registers (qf) when
// Q_IN_REGS, else converted from shared memory (q) at each step.
template <int DH, int BN, int RS, int ST, bool Q_IN_REGS>
__device__ __forceinline__ void warp_qk_f8(float (&s)[BN / 8][4],
                                           const uint32_t (&qf)[Q_IN_REGS ? DH / 16 : 1][4],
                                           const bf16* q, uint32_t k_lane, int lane) {
  static_assert(DH % 32 == 0, "k16 steps go in pairs");
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int kp = 0; kp < DH / 32; kp++) {
    uint32_t a[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      if constexpr (Q_IN_REGS) {
#pragma unroll
        for (int i = 0; i < 4; i++) a[h][i] = qf[2 * kp + h][i];
      } else {
        q_frag_f8<ST>(a[h], q, 2 * kp + h, lane);
      }
    }
#pragma unroll
    for (int np = 0; np < BN / 16; np++) {
      uint32_t b[4];
      ldsm_x4(b, k_lane + uint32_t(np * 16 * RS + kp * 32));
#pragma unroll
      for (int i = 0; i < 4; i++) {  // i: key tile i / 2, k16 step 2·kp + i % 2
        const uint32_t b0 = cuda::f16x2_from_f8x2(uint16_t(b[i] & 0xffffu));
        const uint32_t b1 = cuda::f16x2_from_f8x2(uint16_t(b[i] >> 16));
        mma_f16(s[2 * np + i / 2], a[i % 2], b0, b1);
      }
    }
  }
}

// o += P·V over the tile's BN keys for NV 8-column tiles (NV / 2 chunks of 16 dims,
// even/odd column tiles as above) starting at v_lane's column.
template <int BN, int NV, int RS>
__device__ __forceinline__ void warp_pv_f8(float (&o)[NV][4], const float (&p)[BN / 8][4],
                                           uint32_t v_lane) {
  static_assert(NV % 4 == 0, "16-dim chunks go in pairs");
#pragma unroll
  for (int kk = 0; kk < BN / 16; kk++) {
    const uint32_t a[4] = {pack_f16(p[2 * kk][0], p[2 * kk][1]),
                           pack_f16(p[2 * kk][2], p[2 * kk][3]),
                           pack_f16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack_f16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const uint32_t row = v_lane + uint32_t(kk * 16 * RS);
#pragma unroll
    for (int jp = 0; jp < NV / 4; jp++) {
      uint32_t b[4];
      ldsm_x4_trans(b, row + jp * 32);
#pragma unroll
      for (int h = 0; h < 2; h++) {  // chunk 2·jp + h: regs 2h (keys 0-7), 2h + 1 (8-15)
        const uint32_t lo = __byte_perm(b[2 * h], 0, 0x3120);  // even dims | odd dims
        const uint32_t hi = __byte_perm(b[2 * h + 1], 0, 0x3120);
        const int j = 2 * jp + h;
        mma_f16(o[2 * j], a, cuda::f16x2_from_f8x2(uint16_t(lo & 0xffffu)),
                cuda::f16x2_from_f8x2(uint16_t(hi & 0xffffu)));
        mma_f16(o[2 * j + 1], a, cuda::f16x2_from_f8x2(uint16_t(lo >> 16)),
                cuda::f16x2_from_f8x2(uint16_t(hi >> 16)));
      }
    }
  }
}

}  // namespace tandem::attn
