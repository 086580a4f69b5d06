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
// mma.m16n8k32" with .e4m3). Rows sit kFp8RowStride bytes apart in a stage (64 bytes more
// than a chunk), so the 128-bit loads of 8 lanes (two rows, 64 bytes each) hit all 32
// banks once.
//
// A warp keeps its partial sums across the chunks of a row group, and the 16 warps' meet
// in shared memory at the group's end (cuda_fp8_stream.cuh, where that loop lives, with the
// folding of 128-column block scales: DeepSeek-style 128 x 128 checkpoints and the 1 x 128
// blocks of fused shards, x then quantized per token and 128 columns).
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
#include "backend/cuda/cuda_fp8_stream.cuh"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_stream_input.cuh"
#include "backend/cuda/cuda_weight_stream.cuh"

namespace tandem {

namespace {

using cuda::bf16;
using cuda::Fp8Ring;

constexpr int kStageBytes = Fp8Ring::kStageBytes;
constexpr int kMaxRows = cuda::kFp8MaxRows;
constexpr int kMaxXBytes = cuda::kFp8MaxXBytes;
constexpr int kMaxXScales = cuda::kFp8MaxXScales;
constexpr int kBlockK = cuda::kStreamBlockK;
constexpr int red_bytes(int M) { return cuda::fp8_red_bytes(M); }
constexpr int kMinStages = 3;
static_assert((cuda::kStreamCtaSmem - cuda::kStreamBarrierBytes - kMaxXBytes -
               red_bytes(kMaxRows)) /
                      kStageBytes >=
                  kMinStages,
              "a ring of >= 3 stages beside the largest x");

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

//   out [M, N], x from `in` (cuda_stream_input.cuh: [M, K] bf16), w [N, K] e4m3 scaled by
//   `ws`, bias [N] or null. K % 16 == 0, 1 <= M <= 8.
template <typename Out>
__global__ void __launch_bounds__(cuda::kStreamThreads)
    gemv_fp8_kernel(Out* __restrict__ out, cuda::StreamInput in, const uint8_t* __restrict__ w,
                    cuda::WeightScales ws, const bf16* __restrict__ bias, int M, int N, int K,
                    int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  Fp8Ring ring;
  if (!cuda::open_weight_stream(ring, smem, w, N, K, stages)) return;  // the producer
  uint8_t* xs = ring.end();
  float* red = reinterpret_cast<float*>(xs + ((M * K + 15) & ~15));
  const int G = ws.block() ? (K + kBlockK - 1) / kBlockK : 1;
  __shared__ double sx[kMaxXScales];
  __shared__ float sinv[kMaxXScales];
  __shared__ float scratch[kMaxRows * cuda::kStreamConsumerWarps], rows[kMaxRows];
  cuda::quantize_x(xs, sx, sinv, scratch, rows, in, M, K, G);
  cuda::consume_fp8_stream(ring, ring.wk, 0, xs, sx, red, ws, bias, M,
                           [&](int m, int n, float v) { store_out(out + int64_t(m) * N + n, v); });
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
