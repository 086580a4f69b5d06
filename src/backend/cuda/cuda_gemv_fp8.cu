// The FP8 weight stream: cuda_gemv.cu's few-row linear (one CTA per SM streaming row groups
// through a ring of shared-memory stages with bulk copies; a producer warp, 16 consumer
// warps) for e4m3 weights, at half the bytes per weight, for 1 to 8 rows of x.
//
// The products run on the tensor cores (mma.sync m16n8k32, e4m3 x e4m3 -> f32): a stage
// holds 16 weight rows of 2048 columns, the mma's 16 rows; a warp takes 128 of the columns
// (four mmas), with x's rows (quantized to e4m3, one f32 scale per token) as the mma's
// 8 columns, so up to 8 tokens cost what one does. Widening e4m3 on the CUDA cores instead
// (the first version of this kernel: e4m3 -> f16 -> f32 -> bf16, then bf16 FMAs) spent
// two conversions per weight byte, and the SM's conversion rate (16 per clock), not HBM,
// set the pace: 25–57% of HBM bandwidth.
//
// The mma sums over k in any order, so each lane loads 16 contiguous bytes of a row and
// the same 16 bytes of x, and the two mmas of a 64-column segment take them as their k
// slots {4c..4c+3, 16+4c..16+4c+3} (c = lane % 4): A and B agree on which column sits in
// which slot, which is all the product needs (PTX ISA, "Matrix Fragments for
// mma.m16n8k32" with .e4m3). Rows sit kRowStride bytes apart in a stage (64 bytes more
// than a chunk), so the 128-bit loads of 8 lanes (two rows, 64 bytes each) hit all 32
// banks once.
//
// A warp's partial sums for its columns are kept across the chunks of a row group and
// added across the 16 warps through shared memory when the group's last chunk is done
// (double-buffered by group parity, so one barrier per group suffices); then
// out[m, n] = sum · s_x[m] · s_w[n] (+ bias). Block scales of 128 columns (block_n any,
// block_k 128: DeepSeek-style 128 x 128 checkpoints, and the 1 x 128 blocks of fused
// shards): a warp's 128 columns of a stage are exactly one column block, so it folds its
// mma sums into a running total scaled by s_x[m, kb] · s_w(n, kb) after every stage, and
// x is quantized per token and 128 columns.
//
// x arrives in bf16 and every CTA quantizes it itself into shared memory (amax per token,
// s = max(amax, 1e-12) / 448, e4m3(x / s), in f64: the arithmetic of the quantize kernel
// in cuda_linear_fp8.cu and of the CPU twin, so all CTAs and both backends agree on every
// byte). That costs each CTA a read of x from L2 (8–28 KB a token) and saves a kernel
// launch and its wait on the critical path of every linear: a separate quantize kernel
// before the stream cost 5–10 µs a linear (bench/RESULTS.md).
//
// The consumers' schedule is the one that measured fastest in the decode chain, not alone
// (what runs beside the stream under PDL decides: bench/RESULTS.md, "Moved from the kernel
// files (house issue)").
//
// Launched with programmatic dependent launch: the producer starts the ring before the
// kernel before it ends (weights are never written by a step); the consumers wait before
// reading x.
//
// Three other streams were measured against this ring on an H100 (issue 45) and deleted:
// each CTA loading its weights straight into registers ("direct"), the same two batches a
// warp deep ("deep"), and K split over the CTAs of a cluster ("split"). The 8B layer's four
// linears at 1 row took ring 91.0 µs, direct 112.1, deep 100.9, split 118.6 (2 rows: 99.1,
// 118.2, 107.1, 120.7); FP8 decode-b1 ran at 267, 200, 215 and 206 tok/s.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_stream_input.cuh"
#include "backend/cuda/cuda_weight_stream.cuh"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kRowsPerStage = cuda::kStreamRows;  // the mma's rows
constexpr int kChunk = 2048;                      // columns (bytes) of a row per stage
constexpr int kRowStride = kChunk + 64;
using Ring = cuda::WeightRing<uint8_t, kChunk, kRowStride>;
constexpr int kConsumerWarps = cuda::kStreamConsumerWarps;
constexpr int kConsumers = cuda::kStreamConsumers;
constexpr int kWarpCols = kChunk / kConsumerWarps;  // 128: two 64-column segments
constexpr int kStageBytes = Ring::kStageBytes;
constexpr int kMaxRows = kFp8GemvMaxRows;  // x rows: the mma's 8 columns
constexpr int kMaxXBytes = 32 * 1024;       // x [M, K] staged as e4m3 bytes
// Cross-warp partial sums: [2 group parities][M][16 rows][16 warps] f32.
constexpr int red_bytes(int M) { return 2 * M * kRowsPerStage * kConsumerWarps * 4; }
constexpr int kMinStages = 3;
static_assert((cuda::kStreamCtaSmem - cuda::kStreamBarrierBytes - kMaxXBytes -
               red_bytes(kMaxRows)) /
                      kStageBytes >=
                  kMinStages,
              "a ring of >= 3 stages beside the largest x");

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

// A warp's four mmas over its 128 columns of a stage: rows g and g + 8 of the stage,
// token g of x (zeros for g >= M). Columns at or past `cols` (a row's last, partial
// chunk) add nothing: cols % 16 == 0, so a lane's 16 bytes are all in or all out, and such
// lanes feed zeros (the stage may hold an older chunk's bytes there).
__device__ __forceinline__ void mma_stage(float (&d)[4], const uint8_t* stage, const uint8_t* xs,
                                          int M, int K, int k0, int cols, int warp, int lane) {
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int seg = 0; seg < kWarpCols / 64; seg++) {
    const int k_seg = warp * kWarpCols + seg * 64;
    if (k_seg >= cols) continue;  // warp-uniform: the mma needs every lane
    const int k = k_seg + c * 16;
    const bool in = k < cols;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const uint4 ra = in ? *reinterpret_cast<const uint4*>(stage + g * kRowStride + k) : zero;
    const uint4 rb = in ? *reinterpret_cast<const uint4*>(stage + (g + 8) * kRowStride + k) : zero;
    const uint4 xv = in && g < M ? *reinterpret_cast<const uint4*>(xs + g * K + k0 + k) : zero;
    cuda::mma_e4m3(d, ra.x, rb.x, ra.y, rb.y, xv.x, xv.y);
    cuda::mma_e4m3(d, ra.z, rb.z, ra.w, rb.w, xv.z, xv.w);
  }
}

// Block weights here are [block_n, 128] blocks (x then per token and 128 columns).
constexpr int kBlockK = cuda::kStreamBlockK;
constexpr int kMaxXScales = kMaxXBytes / kBlockK;  // (token, column group) pairs

//   out [M, N], x from `in` (cuda_stream_input.cuh: [M, K] bf16), w [N, K] e4m3 scaled by
//   `ws`, bias [N] or null. K % 16 == 0, 1 <= M <= 8.
template <typename Out>
__global__ void __launch_bounds__(cuda::kStreamThreads)
    gemv_fp8_kernel(Out* __restrict__ out, cuda::StreamInput in, const uint8_t* __restrict__ w,
                    cuda::WeightScales ws, const bf16* __restrict__ bias, int M, int N, int K,
                    int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  Ring ring;
  if (!cuda::open_weight_stream(ring, smem, w, N, K, stages)) return;  // the producer
  uint8_t* xs = ring.end();
  float* red = reinterpret_cast<float*>(xs + ((M * K + 15) & ~15));
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const cuda::StreamWork& wk = ring.wk;
  const bool block = ws.granularity == ScaleGranularity::Block;
  const int G = block ? (K + kBlockK - 1) / kBlockK : 1;
  __shared__ double sx[kMaxXScales];
  __shared__ float sinv[kMaxXScales];
  __shared__ float scratch[kMaxRows * kConsumerWarps], rows[kMaxRows];
  cuda::quantize_x(xs, sx, sinv, scratch, rows, in, M, K, G);

  float d[4] = {0.f, 0.f, 0.f, 0.f};    // this stage's (or, unblocked, this group's) sums
  float tot[4] = {0.f, 0.f, 0.f, 0.f};  // blocks: the group's scaled sums
  const int g = lane >> 2, c = lane & 3;
  for (int i = 0; i < wk.steps; i++) {
    const int chunk = i % wk.chunks;
    const int k0 = chunk * kChunk, cols = min(kChunk, K - k0);
    const int group = wk.group_begin + i / wk.chunks;
    const bool folds = block && warp * kWarpCols < cols;
    const int kb = (k0 + warp * kWarpCols) / kBlockK;
    // Blocks: this stage's weight scales of rows g and g + 8, loaded before the wait so
    // their latency hides behind it (read after the mmas they would stall every stage).
    float sw[2] = {0.f, 0.f};
    if (folds)
#pragma unroll
      for (int h = 0; h < 2; h++)
        sw[h] = ws.at<int>(min(group * kRowsPerStage + g + h * 8, N - 1), kb);
    const uint8_t* stage = ring.wait(i);
    mma_stage(d, stage, xs, M, K, k0, cols, warp, lane);
    ring.release(i, lane);
    if (folds) {  // fold this warp's column block
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int m = 2 * c + (j & 1);
        if (m < M) tot[j] += d[j] * (float(sx[m * G + kb]) * sw[j >> 1]);
        d[j] = 0.f;
      }
    }
    if (chunk != wk.chunks - 1) continue;
    // The group's sums: this warp's (rows g, g + 8; tokens 2c, 2c + 1) into red, then one
    // thread per (token, row) adds the 16 warps' and writes out.
    float* r = red + (group & 1) * (M * kRowsPerStage * kConsumerWarps);
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int m = 2 * c + (j & 1), row = g + (j >> 1) * 8;
      if (m < M) r[(m * kRowsPerStage + row) * kConsumerWarps + warp] = block ? tot[j] : d[j];
      d[j] = 0.f;
      tot[j] = 0.f;
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
    const int t = int(threadIdx.x);
    if (t < M * kRowsPerStage) {
      const int m = t / kRowsPerStage, row = t % kRowsPerStage;
      const int n = group * kRowsPerStage + row;
      if (n < N) {
        const float4* p = reinterpret_cast<const float4*>(r + t * kConsumerWarps);
        float s = 0.f;
#pragma unroll
        for (int q = 0; q < kConsumerWarps / 4; q++) {
          const float4 v = p[q];
          s += (v.x + v.y) + (v.z + v.w);
        }
        if (!block) s *= float(sx[m]) * ws.at<int>(n, 0);
        if (bias != nullptr) s += __bfloat162float(bias[n]);
        store_out(out + int64_t(m) * N + n, s);
      }
    }
  }
}

// Ring stages left beside x and the cross-warp sums.
int64_t other_bytes(int64_t M, int64_t K) {
  return ((M * K + 15) & ~int64_t(15)) + red_bytes(int(M));
}
int ring_stages(int64_t M, int64_t K) {
  return int(cuda::stream_ring_stages(other_bytes(M, K), kStageBytes));
}

template <typename Out>
void launch(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  const int M = int(a.x->rows()), N = int(a.w->dim(0)), K = int(a.w->dim(1));
  static std::atomic<uint64_t> smem_ready{0};
  const int stages = ring_stages(M, K);
  const cuda::StreamInput in{a.x->ptr<bf16>(), a.static_scale};
  cuda::launch_weight_stream(
      "gemv_fp8_kernel", &gemv_fp8_kernel<Out>, smem_ready, be, N, stages, kStageBytes,
      other_bytes(M, K), out.ptr<Out>(), in, a.w->ptr<uint8_t>(), a.w_scales,
      a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr, M, N, K, stages);
}

}  // namespace

bool fp8_gemv_fits(int64_t M, int64_t N, int64_t K, int64_t block_k, const void* x, const void* w) {
  return M >= 1 && M <= kMaxRows && K % 16 == 0 && N < (int64_t(1) << 31) &&
         (block_k == 0 ||
          (block_k == kBlockK && M * ((K + kBlockK - 1) / kBlockK) <= kMaxXScales)) &&
         M * K <= kMaxXBytes && ring_stages(M, K) >= kMinStages && cuda::aligned16(x) &&
         cuda::aligned16(w);
}

void launch_fp8_gemv(CudaBackend& be, Tensor& out, const Fp8GemvArgs& a) {
  if (out.dtype == DType::F32) return launch<float>(be, out, a);
  launch<bf16>(be, out, a);
}

}  // namespace tandem
