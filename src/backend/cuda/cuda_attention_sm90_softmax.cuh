// Private to cuda_attention_prefill_sm90.cu: what a consumer warpgroup does between its
// two products on each key tile — scores to probabilities (the online softmax, with the
// scale folded into the exponent), O's rescale, and P packed as the P·V wgmma's A
// fragments. Register layouts are the m64nNk16 accumulator's (cuda_attention_sm90.cuh):
// a thread holds two rows (g and g + 8 of its warp's 16) and, per 8-column tile, columns
// 2c and 2c + 1.
#pragma once

#include "backend/cuda/cuda_attention.cuh"

namespace tandem::attn {

// P as the P·V wgmma's A operand: S's accumulator fragment is already the A fragment's
// layout, so each pair of probabilities is packed to bf16 in place.
template <int BN>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[BN / 16][4], const float (&p)[BN / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; kk++) {
    pa[kk][0] = pack_bf16(p[2 * kk][0], p[2 * kk][1]);
    pa[kk][1] = pack_bf16(p[2 * kk][2], p[2 * kk][3]);
    pa[kk][2] = pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
    pa[kk][3] = pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
  }
}

// The thread's two rows of the warpgroup's tile: their visible key ranges, and the CTA's.
struct ConsumerRows {
  int lo[2], hi[2];
  int kmin, hi_min, lo_max;
};

// score_tile and softmax_tile (cuda_attention.cuh) with the scale folded into the
// exponent (FlashAttention-3's form): scores stay raw dot products, x = s · mul in log2
// units with mul = qk_mul (or 1 after a softcap, which scales itself), so each score costs
// one FFMA and one ex2 instead of a multiply, a subtract and the ex2. m is kept in raw
// units; mul > 0, so the max commutes with it. (The decode and mma.sync kernels keep the
// scaled form: their split merge reads m in log2 units, and they were not re-measured.)
template <int BN>
__device__ __forceinline__ float score_tile_raw(float (&s)[BN / 8][4], const AttnArgs& a, int kt,
                                                const int (&lo)[2], const int (&hi)[2],
                                                bool masked, int lane) {
  const bool cap = a.cap_log2 > 0.f;
  if (!cap && !masked) return a.qk_mul;
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      float x = s[nt][e];
      if (cap) x = a.cap_log2 * softcap_tanh(x * a.qk_mul);
      if (masked) {
        const int j = kt + nt * 8 + 2 * (lane & 3) + (e & 1);
        if (j < lo[e >> 1] || j > hi[e >> 1]) x = -INFINITY;
      }
      s[nt][e] = x;
    }
  }
  return cap ? 1.f : a.qk_mul;
}

template <int BN>
__device__ __forceinline__ void softmax_tile_raw(float (&s)[BN / 8][4], float mul, float (&m)[2],
                                                 float (&l)[2], float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float mx = tile_row_max<BN>(s, m[r], r);
    const float base = mx == -INFINITY ? 0.f : mx * mul;  // no visible key yet: P = 0
    // An unchanged max gives alpha = 1 exactly (the FFMA would leave m·mul's rounding in it).
    alpha[r] = mx == m[r] ? 1.f : fast_exp2(fmaf(m[r], mul, -base));
    m[r] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++) {
      s[nt][2 * r] = fast_exp2(fmaf(s[nt][2 * r], mul, -base));
      s[nt][2 * r + 1] = fast_exp2(fmaf(s[nt][2 * r + 1], mul, -base));
      sum += s[nt][2 * r] + s[nt][2 * r + 1];
    }
    l[r] = l[r] * alpha[r] + sum;
  }
}

// Scores of tile t (keys from kmin + t·BN) to probabilities; alpha as softmax_tile. The
// scale rides in the exponent's FFMA (score_tile_raw: one FFMA and one ex2 a score instead
// of a multiply, a subtract and the ex2; 395 -> 441 TFLOP/s at 8k on the H200).
template <int BN>
__device__ __forceinline__ void score_and_softmax(float (&s)[BN / 8][4], const AttnArgs& a,
                                                  const ConsumerRows& cr, int t, float (&m)[2],
                                                  float (&l)[2], float (&alpha)[2], int lane) {
  const int kt = cr.kmin + t * BN;
  const bool masked = kt + BN - 1 > cr.hi_min || kt < cr.lo_max;
  const float mul = score_tile_raw<BN>(s, a, kt, cr.lo, cr.hi, masked, lane);
  softmax_tile_raw<BN>(s, mul, m, l, alpha);
}

// O *= alpha per row, but not in a warp whose rows all keep their max (alpha = 1 exactly
// in all 32 lanes: most tiles once the maxima settle), where it would change nothing
// (439 -> 461 TFLOP/s at 8k on the H200).
template <int NV>
__device__ __forceinline__ void rescale_o(float (&o)[NV][4], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int nv = 0; nv < NV; nv++) {
    o[nv][0] *= alpha[0];
    o[nv][1] *= alpha[0];
    o[nv][2] *= alpha[1];
    o[nv][3] *= alpha[1];
  }
}

}  // namespace tandem::attn
