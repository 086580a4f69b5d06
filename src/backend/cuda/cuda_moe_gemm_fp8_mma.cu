// The FP8 expert GEMMs on the e4m3 tensor cores (cuda_moe_gemm.h: launch_moe_gate_up_fp8_tc,
// launch_moe_down_fp8_tc): mma.sync.m16n8k32 e4m3 · e4m3 → f32 (sm_89+). A block computes
// one expert's 64-row tile (cuda_moe_tiles.cuh) against 64 weight rows: 64 output columns,
// or gated the gate and the up rows of 32 columns (act(gate) * up wants both in one
// thread). 4 warps, 2 x 2, each 32 tile rows against half of each weight half, in 16 x 8
// fragments: a thread's accumulators and totals are 64 floats either way (at 64 gated
// columns they were 128, the registers capped at 255 and 2 blocks an SM).
// Both operands stay e4m3 bytes from global memory to the MMA: the weight rows and a
// dynamic input's e4m3 rows (read through the slot's row index) come by cp.async into a
// four-stage shared-memory ring; a static-scale input is quantized from bf16 by the tile's
// expert's scale as it is staged (one token meets a different scale in each of its
// experts).
//
// The arithmetic is expert_gemm_fp8_kernel's (cuda_moe_gemm.cu, the reference): e4m3
// products are exact in f32 and the MMA sums them in f32; the columns that share one pair
// of scales (a block_k block of block weights, else all of K) are summed in the
// accumulators, and at the group's end each accumulator is scaled by s_x(row) · s_w(column)
// and added to the thread's f32 totals. The fragment layout names every accumulator's row
// and column, so this "fold" runs in registers. Only the order of the f32 sums differs.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_attention.cuh"  // cp_async_16, smem_addr
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_moe_gemm.h"
#include "backend/cuda/cuda_moe_tiles.cuh"

namespace tandem::cuda {

namespace {

using attn::cp_async_16;
using attn::cp_async_commit;
using attn::cp_async_wait;
using attn::smem_addr;

constexpr int kBM = kMoeTileRows, kThreads = 128;
// Output columns of a block: 64, or 32 gated (each with a gate and an up weight row).
template <bool kGated>
constexpr int kTileN = kGated ? 32 : 64;
constexpr int kMaxStep = 64;  // K bytes per stage; 32 where block_k is an odd multiple of 32
// Stages in the ring (40 KB of shared memory with the a_row table: under the 48 KB of a
// static allocation): deep enough that a block keeps 3 stages of weight bytes in flight,
// which the few-row steps (decode), bound by the weight stream, want.
constexpr int kStages = 4;
// Shared row stride in bytes: a multiple of 16 (cp.async), and 20 words, so the 8 rows x 4
// words of one fragment load fall in 32 distinct banks.
constexpr int kLd = kMaxStep + 16;

// One stage of the ring: the tile's 64 input rows and its kB x kN weight rows (64 in all),
// K bytes [k0, k0 + step) of each (zeros past K, past the tile's rows and past N).
template <int kB, int kN>
struct Stage {
  uint8_t a[kBM][kLd];
  uint8_t b[kB][kN][kLd];
};

// Accumulators and totals of one thread: [half (gate, up)][m fragment][n fragment][4], kNF
// = kN / 16 n fragments (a warp covers half the columns). Element c of fragment (i, j) is
// row wr + 16i + g + 8·(c / 2), column wc + 8j + 2·t4 + c % 2 of the tile (g = lane / 4,
// t4 = lane % 4: mma.sync's m16n8 C layout).
template <int kB, int kNF>
using Frags = float[kB][2][kNF][4];

// d += a · b on one 16 x 8 x 32 fragment (A row-major 16 x 32, B column-major 32 x 8).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t lds32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// What a block reads: its expert's weights and the rows of `in` its slots take.
struct TileOperands {
  Fp8ExpertInput in;
  const uint8_t* w;      // the expert's [kB·N, K] e4m3 rows
  const int64_t* a_row;  // [kBM] (shared): the row of `in` of each tile row, -1 past the rows
  int64_t n0, N, K;
  double s_static;  // static inputs: the expert's input scale, in f64 as quantize_row takes it
  float inv_static;
};

// The 16 bytes [k, k + 16) of input row `src` (-1: none) as e4m3, zeros past K; a static
// input quantized here (quantize_row's arithmetic: f8_quotient). kVec: K % 16 == 0 and the
// rows 16-byte aligned, so the chunk is whole or absent.
template <bool kVec, bool kStatic>
__device__ __forceinline__ void stage_input_chunk(uint8_t* dst, const TileOperands& op, int64_t src,
                                                  int64_t k) {
  const int64_t K = op.K;
  if constexpr (kVec && !kStatic) {
    const bool ok = src >= 0 && k < K;
    cp_async_16(smem_addr(dst), ok ? op.in.q + src * K + k : op.in.q, ok ? 16 : 0);
  } else if constexpr (kVec) {
    uint4 q = make_uint4(0, 0, 0, 0);
    if (src >= 0 && k < K) {
      const uint4* x = reinterpret_cast<const uint4*>(op.in.x + src * K + k);
      uint32_t* words = reinterpret_cast<uint32_t*>(&q);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uint4 v = x[h];
        const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
        for (int i = 0; i < 8; i++)
          words[h * 2 + i / 4] |=
              uint32_t(f8_quotient(__bfloat162float(e[i]), op.s_static, op.inv_static))
              << (8 * (i % 4));
      }
    }
    *reinterpret_cast<uint4*>(dst) = q;
  } else {
#pragma unroll 4
    for (int i = 0; i < 16; i++) {
      uint8_t v = 0;
      if (src >= 0 && k + i < K) {
        if constexpr (kStatic)
          v = f8_quotient(__bfloat162float(op.in.x[src * K + k + i]), op.s_static, op.inv_static);
        else
          v = op.in.q[src * K + k + i];
      }
      dst[i] = v;
    }
  }
}

// The 16 bytes [k, k + 16) of weight row `row` (-1: none), zeros past K.
template <bool kVec>
__device__ __forceinline__ void stage_weight_chunk(uint8_t* dst, const TileOperands& op,
                                                   int64_t row, int64_t k) {
  const int64_t K = op.K;
  if constexpr (kVec) {
    const bool ok = row >= 0 && k < K;
    cp_async_16(smem_addr(dst), ok ? op.w + row * K + k : op.w, ok ? 16 : 0);
  } else {
#pragma unroll 4
    for (int i = 0; i < 16; i++) dst[i] = row >= 0 && k + i < K ? op.w[row * K + k + i] : 0;
  }
}

// Issues stage K bytes [k0, k0 + step) into s (cp.async where it can; the caller commits).
template <int kB, int kN, bool kVec, bool kStatic>
__device__ __forceinline__ void load_stage(Stage<kB, kN>& s, const TileOperands& op, int64_t k0,
                                           int step) {
  const int per_row = step / 16;
  for (int c = threadIdx.x; c < kBM * per_row; c += kThreads) {
    const int r = c / per_row, kc = (c % per_row) * 16;
    stage_input_chunk<kVec, kStatic>(&s.a[r][kc], op, op.a_row[r], k0 + kc);
  }
  for (int c = threadIdx.x; c < kB * kN * per_row; c += kThreads) {
    const int b = c / (kN * per_row), r = (c / per_row) % kN, kc = (c % per_row) * 16;
    const int64_t n = op.n0 + r;
    stage_weight_chunk<kVec>(&s.b[b][r][kc], op, n < op.N ? b * op.N + n : -1, k0 + kc);
  }
}

// acc += the stage's products for the warp's corner (rows wr.., columns wc..).
template <int kB, int kN>
__device__ __forceinline__ void mma_stage(Frags<kB, kN / 16>& acc, const Stage<kB, kN>& s, int step,
                                          int wr, int wc, int g, int t4) {
  for (int kk = 0; kk < step; kk += 32) {
    uint32_t a[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int r = wr + 16 * i + g, k = kk + 4 * t4;
      a[i][0] = lds32(&s.a[r][k]);
      a[i][1] = lds32(&s.a[r + 8][k]);
      a[i][2] = lds32(&s.a[r][k + 16]);
      a[i][3] = lds32(&s.a[r + 8][k + 16]);
    }
#pragma unroll
    for (int b = 0; b < kB; b++)
#pragma unroll
      for (int j = 0; j < kN / 16; j++) {
        const uint8_t* col = &s.b[b][wc + 8 * j + g][kk + 4 * t4];
        const uint32_t b0 = lds32(col), b1 = lds32(col + 16);
#pragma unroll
        for (int i = 0; i < 2; i++) mma_e4m3(acc[b][i][j], a[i], b0, b1);
      }
  }
}

// total += acc · s_x(row) · s_w(column) for column group kb, then acc = 0. Rows past the
// tile's slots and columns past N get scale 0 (their accumulators are zeros anyway).
template <int kB, int kNF, bool kStatic>
__device__ __forceinline__ void fold(Frags<kB, kNF>& acc, Frags<kB, kNF>& total,
                                     const TileOperands& op, const WeightScales& ws, int64_t groups,
                                     int64_t kb, int wr, int wc, int g, int t4) {
  float sx[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t src = op.a_row[wr + 16 * i + g + 8 * h];
      sx[i][h] = src < 0 ? 0.f : kStatic ? float(op.s_static) : op.in.scales[src * groups + kb];
    }
#pragma unroll
  for (int b = 0; b < kB; b++)
#pragma unroll
    for (int j = 0; j < kNF; j++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        const int64_t n = op.n0 + wc + 8 * j + 2 * t4 + c;
        const float sw = n < op.N ? ws.at(b * op.N + n, kb) : 0.f;
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            total[b][i][j][2 * h + c] += acc[b][i][j][2 * h + c] * (sx[i][h] * sw);
            acc[b][i][j][2 * h + c] = 0.f;
          }
      }
}

// out[row0 + r, n0 + c] for the thread's elements: act(gate) * up when gated, else the sum.
template <bool kGated, Activation A>
__device__ __forceinline__ void store_tile(bf16* out,
                                           const Frags<kGated ? 2 : 1, kTileN<kGated> / 16>& total,
                                           int64_t row0, int64_t num_rows, int64_t n0, int64_t N,
                                           int wr, int wc, int g, int t4) {
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = wr + 16 * i + g + 8 * h;
      if (r >= num_rows) continue;
#pragma unroll
      for (int j = 0; j < kTileN<kGated> / 16; j++) {
        const int64_t n = n0 + wc + 8 * j + 2 * t4;
        float v[2];
#pragma unroll
        for (int c = 0; c < 2; c++) {
          const float x = total[0][i][j][2 * h + c];
          if constexpr (kGated)
            v[c] = activate<A>(x) * total[kGated ? 1 : 0][i][j][2 * h + c];
          else
            v[c] = x;
        }
        bf16* o = out + (row0 + r) * N + n;
        if (N % 2 == 0 && n + 1 < N)  // (row0 + r) · N + n is even: a 4-byte store
          *reinterpret_cast<__nv_bfloat162*>(o) = __floats2bfloat162_rn(v[0], v[1]);
        else
          for (int c = 0; c < 2; c++)
            if (n + c < N) o[c] = __float2bfloat16_rn(v[c]);
      }
    }
}

// expert_gemm_fp8_kernel's output (cuda_moe_gemm.cu) on the e4m3 tensor cores: weights
// w.w [E, kB·N, K] (gate rows then up rows when gated), input `in` (Fp8ExpertInput), row
// src(s) = in_row ? in_row[s] : s of `in` for slot s. step: the K bytes of a stage (64, or
// 32 where block_k is not a multiple of 64). kVec: K % 16 == 0, w.w and in.q / in.x
// 16-byte aligned. grid: (ceil(N / kTileN), rows.max_row_tiles)
template <bool kGated, bool kVec, bool kStatic, Activation A>
__global__ void __launch_bounds__(kThreads)
    expert_gemm_fp8_mma_kernel(bf16* __restrict__ out, const Fp8ExpertInput in,
                               const int32_t* __restrict__ in_row, const Fp8ExpertWeights w,
                               const ExpertRows rows, int64_t N, int64_t K, int step) {
  constexpr int kB = kGated ? 2 : 1, kN = kTileN<kGated>;
  __shared__ __align__(16) Stage<kB, kN> ring[kStages];
  __shared__ int64_t a_row[kBM];

  const MoeRowTile rt = moe_row_tile(rows);
  if (rt.expert < 0) return;  // the whole block leaves
  const int e = rt.expert;
  for (int r = threadIdx.x; r < kBM; r += kThreads)
    a_row[r] = r < rt.num_rows ? int64_t(in_row ? in_row[rt.row0 + r] : rt.row0 + r) : -1;
  TileOperands op{in, w.w + int64_t(e) * kB * N * K, a_row, int64_t(blockIdx.x) * kN, N, K, 1.0,
                  1.f};
  if constexpr (kStatic) {
    op.s_static = double(in.input_scale[e]);
    op.inv_static = float(1.0 / op.s_static);
  }
  WeightScales ws = w.scales;
  ws.s += int64_t(e) * w.scales_per_expert;
  const int64_t group = ws.block() ? w.block_k : K, groups = ws.num_k_blocks;
  __syncthreads();  // a_row

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t4 = lane % 4, wr = (warp / 2) * 32, wc = (warp % 2) * (kN / 2);
  Frags<kB, kN / 16> acc = {}, total = {};
  const int64_t steps = (K + step - 1) / step;
  // The ring: stage t lives in ring[t % kStages]; kStages - 1 stages fly ahead of the MMAs.
  // One cp.async group is committed per stage issued, empty past the last, so before
  // iteration t there are kStages - 1 + t groups and waiting for all but kStages - 2 of
  // them lands stage t.
  for (int s = 0; s < kStages - 1; s++) {
    if (s < steps) load_stage<kB, kN, kVec, kStatic>(ring[s], op, s * step, step);
    cp_async_commit();
  }
  for (int64_t t = 0; t < steps; t++) {
    cp_async_wait<kStages - 2>();
    // Stage t is visible to all, and every warp is done with stage t - 1, whose slot the
    // next load refills.
    __syncthreads();
    const int64_t next = t + kStages - 1;
    if (next < steps)
      load_stage<kB, kN, kVec, kStatic>(ring[next % kStages], op, next * step, step);
    cp_async_commit();
    mma_stage<kB, kN>(acc, ring[t % kStages], step, wr, wc, g, t4);
    const int64_t k0 = t * step;
    if ((k0 + step) % group == 0 || k0 + step >= K)  // a column group ends in this stage
      fold<kB, kN / 16, kStatic>(acc, total, op, ws, groups, k0 / group, wr, wc, g, t4);
  }
  store_tile<kGated, A>(out, total, rt.row0, rt.num_rows, op.n0, N, wr, wc, g, t4);
}

template <bool kGated, Activation A>
void launch_tc(cudaStream_t stream, bf16* out, const Fp8ExpertInput& in, const int32_t* in_row,
               const Fp8ExpertWeights& w, const ExpertRows& rows, int64_t N, int64_t K) {
  if (rows.max_row_tiles <= 0 || N <= 0) return;
  const dim3 grid = moe_expert_grid(rows, N, kTileN<kGated>);
  const bool vec =
      K % 16 == 0 && aligned16(w.w) && (in.is_static() ? aligned16(in.x) : aligned16(in.q));
  // A stage must not straddle two column groups: block_k is a multiple of kMoeTileK (32).
  const int step = !w.scales.block() || w.block_k % kMaxStep == 0 ? kMaxStep : kMoeTileK;
  auto kernel = in.is_static() ? (vec ? &expert_gemm_fp8_mma_kernel<kGated, true, true, A>
                                      : &expert_gemm_fp8_mma_kernel<kGated, false, true, A>)
                               : (vec ? &expert_gemm_fp8_mma_kernel<kGated, true, false, A>
                                      : &expert_gemm_fp8_mma_kernel<kGated, false, false, A>);
  kernel<<<grid, kThreads, 0, stream>>>(out, in, in_row, w, rows, N, K, step);
  TANDEM_CUDA_LAUNCHED(kGated ? "expert_gemm_fp8_mma_kernel (gate_up)"
                              : "expert_gemm_fp8_mma_kernel (down)");
}

}  // namespace

void launch_moe_gate_up_fp8_tc(cudaStream_t stream, bf16* a, const Fp8ExpertInput& x,
                               const int32_t* token, const Fp8ExpertWeights& gate_up,
                               const ExpertRows& rows, int64_t D, int64_t F, Activation act) {
  if (act == Activation::SiLU)
    launch_tc<true, Activation::SiLU>(stream, a, x, token, gate_up, rows, F, D);
  else
    launch_tc<true, Activation::GeluTanh>(stream, a, x, token, gate_up, rows, F, D);
}

void launch_moe_down_fp8_tc(cudaStream_t stream, bf16* y, const Fp8ExpertInput& a,
                            const Fp8ExpertWeights& down, const ExpertRows& rows, int64_t D,
                            int64_t F) {
  // The activation parameter is unused by the plain variant.
  launch_tc<false, Activation::SiLU>(stream, y, a, nullptr, down, rows, D, F);
}

}  // namespace tandem::cuda
