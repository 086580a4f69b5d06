// The GEMM tile, written once over a vector type V (V::Reg, with load/fma/reduce and
// the weight widening) and instantiated by each ISA's kernel file with its own V. Only
// those files include this header, and all of it is in an anonymous namespace, so every
// function is private to its file: no inline code compiled for AVX-512 can be picked by
// the linker for the AVX2 path.
//
// A tile is MR x rows against NR weight rows: MR·NR accumulators over the packed chunks
// of k, then one horizontal sum each. Each accumulator sums its chunks in k order and
// its lanes in V::reduce's order, so an output element gets the same bits from every
// tile shape.
#pragma once

#include <xmmintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_gemm_kernels.h"

namespace tandem::cpu {
namespace {

template <WeightType WT>
constexpr int64_t kWeightBytes = weight_bytes(WT);

// A tile of NR > 1 weight rows prefetches each row's chunk into L2 from the row this many
// rows further on, which a later tile reads: NR interleaved row streams defeat the
// hardware prefetchers (single core, bf16, K = 768: 7 -> 20 GB/s at four x rows). A
// single-row tile is one sequential stream and prefetches nothing.
constexpr int64_t kPrefetchRows = 8;

// One chunk: acc[i][j] += x_i · w_j over the chunk's 2 · V::kLanes k values (w_j times
// s[j] for E4M3_BLOCKS).
template <class V, WeightType WT, int MR, int NR>
inline void chunk_step(typename V::Reg (&acc)[MR][NR], const float* const (&x)[MR],
                       const char* const (&w)[NR], const float (&s)[NR]) {
  typename V::Reg xa[MR], xb[MR];
  for (int i = 0; i < MR; i++) {
    xa[i] = V::load(x[i]);
    xb[i] = V::load(x[i] + V::kLanes);
  }
  for (int j = 0; j < NR; j++) {
    typename V::Reg wa, wb;
    if constexpr (WT == WeightType::E4M3_BLOCKS) {
      V::template widen<WeightType::E4M3>(w[j], wa, wb);
      const typename V::Reg sj = V::set1(s[j]);
      wa = V::mul(wa, sj);
      wb = V::mul(wb, sj);
    } else {
      V::template widen<WT>(w[j], wa, wb);
    }
    for (int i = 0; i < MR; i++) {
      acc[i][j] = V::fma(xa[i], wa, acc[i][j]);
      acc[i][j] = V::fma(xb[i], wb, acc[i][j]);
    }
  }
}

// out[m0 + i, n0 + j] for i < MR, j < NR.
template <class V, WeightType WT, int MR, int NR>
void tile(const GemmOperands& g, int64_t m0, int64_t n0) {
  constexpr int64_t C = 2 * V::kLanes, EB = kWeightBytes<WT>;
  typename V::Reg acc[MR][NR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i][j] = V::zero();
  const float* x[MR];
  const char* w[NR];
  for (int i = 0; i < MR; i++) x[i] = g.xp + (m0 + i) * g.kp;
  for (int j = 0; j < NR; j++) w[j] = static_cast<const char*>(g.w) + (n0 + j) * g.K * EB;
  // E4M3_BLOCKS: each row's scales, and the chunk's (block_k is a whole number of chunks).
  const float* srow[NR] = {};
  float s[NR] = {};
  if constexpr (WT == WeightType::E4M3_BLOCKS)
    for (int j = 0; j < NR; j++) srow[j] = g.blocks.s + (n0 + j) / g.blocks.block_n * g.blocks.ld;
  auto chunk_scales = [&](int64_t c) {
    if constexpr (WT == WeightType::E4M3_BLOCKS)
      for (int j = 0; j < NR; j++) s[j] = srow[j][c * C / g.blocks.block_k];
  };
  const int64_t full = g.K / C, ahead = kPrefetchRows * g.K * EB;
  for (int64_t c = 0; c < full; c++) {
    if constexpr (NR > 1)
      for (int j = 0; j < NR; j++) _mm_prefetch(w[j] + ahead, _MM_HINT_T1);
    chunk_scales(c);
    chunk_step<V, WT, MR, NR>(acc, x, w, s);
    for (int i = 0; i < MR; i++) x[i] += C;
    for (int j = 0; j < NR; j++) w[j] += C * EB;
  }
  if (const int64_t tail = g.K - full * C; tail > 0) {
    // The last, partial chunk from zero-padded copies: x is zero there already, and
    // reading the weight row past its end could leave the tensor.
    alignas(64) char pad[NR][C * EB];
    const char* pw[NR];
    for (int j = 0; j < NR; j++) {
      std::memset(pad[j], 0, sizeof(pad[j]));
      std::memcpy(pad[j], w[j], size_t(tail * EB));
      pw[j] = pad[j];
    }
    chunk_scales(full);
    chunk_step<V, WT, MR, NR>(acc, x, pw, s);
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) g.out[(m0 + i) * g.ldo + n0 + j] = V::reduce(acc[i][j]);
}

// MR x rows from m0 against weight rows [n0, n1), NR at a time, then one by one.
template <class V, WeightType WT, int MR, int NR>
void row_group(const GemmOperands& g, int64_t m0, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + NR <= n1; n += NR) tile<V, WT, MR, NR>(g, m0, n);
  for (; n < n1; n++) tile<V, WT, MR, 1>(g, m0, n);
}

// Every x row against weight rows [n0, n1): block by block, and within a block every
// group of MR x rows (then the rows left over) over the block. A lone x row takes NR1
// weight rows per tile: with NR1 = 1 one x row reads the weights as one sequential
// stream, which the hardware prefetchers follow best on their own (the llama-100m step's
// 200 MB on huge pages, one thread: 7-9 ms against 9-10 ms for four rows with the L2
// prefetch, 15-18 ms for four rows without it).
template <class V, WeightType WT, int MR, int NR, int NR1>
void rows_of(const GemmOperands& g, int64_t n0, int64_t n1) {
  static_assert(MR >= 1 && MR <= 4);
  for (int64_t b0 = n0; b0 < n1; b0 += g.block_rows) {
    const int64_t b1 = b0 + g.block_rows < n1 ? b0 + g.block_rows : n1;
    int64_t m = 0;
    for (; m + MR <= g.M; m += MR) {
      if constexpr (MR == 1)
        row_group<V, WT, 1, NR1>(g, m, b0, b1);
      else
        row_group<V, WT, MR, NR>(g, m, b0, b1);
    }
    const int64_t left = g.M - m;
    if constexpr (MR > 3)
      if (left == 3) row_group<V, WT, 3, NR>(g, m, b0, b1);
    if constexpr (MR > 2)
      if (left == 2) row_group<V, WT, 2, NR>(g, m, b0, b1);
    if constexpr (MR > 1)
      if (left == 1) row_group<V, WT, 1, NR1>(g, m, b0, b1);
  }
}

// dst[i] = bf16(e4m3 src[i]), through V::widen (exact f32, whose top half is the bf16).
template <class V>
void widen_e4m3_to_bf16(const uint8_t* src, uint16_t* dst, int64_t n) {
  constexpr int64_t C = 2 * V::kLanes;
  int64_t i = 0;
  for (; i + C <= n; i += C) {
    typename V::Reg a, b;
    V::template widen<WeightType::E4M3>(reinterpret_cast<const char*>(src + i), a, b);
    V::store_bf16(dst + i, a);
    V::store_bf16(dst + i + V::kLanes, b);
  }
  if (i < n) {
    alignas(64) uint8_t pad[C] = {};
    alignas(64) uint16_t out[C];
    std::memcpy(pad, src + i, size_t(n - i));
    typename V::Reg a, b;
    V::template widen<WeightType::E4M3>(reinterpret_cast<const char*>(pad), a, b);
    V::store_bf16(out, a);
    V::store_bf16(out + V::kLanes, b);
    std::memcpy(dst + i, out, size_t(n - i) * 2);
  }
}

// gemm_rows for V, dispatched on the weight type once per call.
template <class V, int MR, int NR, int NR1>
void gemm_rows_for(const GemmOperands& g, int64_t n0, int64_t n1) {
  switch (g.wt) {
    case WeightType::BF16: return rows_of<V, WeightType::BF16, MR, NR, NR1>(g, n0, n1);
    case WeightType::F16: return rows_of<V, WeightType::F16, MR, NR, NR1>(g, n0, n1);
    case WeightType::F32: return rows_of<V, WeightType::F32, MR, NR, NR1>(g, n0, n1);
    case WeightType::E4M3: return rows_of<V, WeightType::E4M3, MR, NR, NR1>(g, n0, n1);
    case WeightType::E4M3_BLOCKS: return rows_of<V, WeightType::E4M3_BLOCKS, MR, NR, NR1>(g, n0, n1);
  }
}

}  // namespace
}  // namespace tandem::cpu
