// LoRA on CUDA (Backend::lora_add): every adapter of the step in two launches per
// projection, over the step's adapter tokens grouped by slot (LoraRows::order). Each
// adapter's rows are contiguous there, so consecutive rows of a block read the same rows
// of A and B, which come from L1/L2 after the first (punica's segmented idea, without a
// launch per adapter):
//   shrink: v[i] = A[s] · x[t]     for t = order[i], s = slots[t]     v [T, R] f32
//   expand: out[t] += B[s] · v[i]                                      out [T, N] bf16
// Tokens of slot 0 are not in `order` and cost nothing but blocks that return at once. The
// grids depend only on T, R and N, never on how many tokens have adapters (num_active is
// read on the device), so a decode graph recorded once replays for any mix of adapters,
// and the banks are read through their fixed addresses (an adapter installed later into a
// slot is what the next replay reads). bf16 storage, f32 arithmetic; v stays f32 between
// the two products, as on the CPU.
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

__device__ __forceinline__ int64_t cuda_ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

constexpr int kRowsPerBlock = 4;     // sorted adapter tokens per block, both kernels
constexpr int kShrinkWarps = 8;      // a shrink block's warps, each a slice of K
constexpr int kExpandThreads = 256;  // output columns per expand block, one per thread
constexpr int kMaxRank = 1024;       // the expand block's v tile [kRowsPerBlock, R] f32

// grid (R, ⌈T / kRowsPerBlock⌉). Block (r, by) computes v[i, r] for its sorted tokens i:
// warp w sums its slice of K (lanes striding it by P elements), then the warps' partial
// sums are added in warp order, so a token's v never depends on the tokens beside it.
// Splitting K keeps the GPU busy when R is small (a rank-16 down projection is 16 rows).
template <int P, bool kVec>
__global__ void lora_shrink_kernel(float* __restrict__ v, const bf16* __restrict__ x,
                                   const bf16* __restrict__ a, const int32_t* __restrict__ slots,
                                   const int32_t* __restrict__ order,
                                   const int32_t* __restrict__ num_active, int R, int64_t K) {
  __shared__ float partial[kShrinkWarps][kRowsPerBlock];
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int r = int(blockIdx.x);
  const int begin = int(blockIdx.y) * kRowsPerBlock;
  const int end = min(begin + kRowsPerBlock, *num_active);
  if (begin >= end) return;  // the whole block leaves together, before the barrier
  const int64_t per_warp = cuda_ceil_div(cuda_ceil_div(K, P), kShrinkWarps) * P;
  const int64_t k0 = int64_t(warp) * per_warp, k1 = k0 + per_warp < K ? k0 + per_warp : K;
  for (int i = begin; i < end; i++) {
    const int t = order[i];
    const bf16* arow = a + (int64_t(slots[t]) * R + r) * K;
    const bf16* xrow = x + int64_t(t) * K;
    float acc = 0.f;
    for (int64_t k = k0 + int64_t(lane) * P; k < k1; k += 32 * P) {
      float av[P], xv[P];
      cuda::load_n<P, kVec>(arow + k, av);
      cuda::load_n<P, kVec>(xrow + k, xv);
#pragma unroll
      for (int j = 0; j < P; j++) acc += av[j] * xv[j];
    }
    acc = cuda::warp_sum(acc);
    if (lane == 0) partial[warp][i - begin] = acc;
  }
  __syncthreads();
  if (int(threadIdx.x) < end - begin) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kShrinkWarps; w++) sum += partial[w][threadIdx.x];
    v[int64_t(begin + int(threadIdx.x)) * R + r] = sum;
  }
}

// grid (⌈N / kExpandThreads⌉, ⌈T / kRowsPerBlock⌉), dynamic shared memory
// kRowsPerBlock·R floats. Thread n of the block adds B[s][n] · v[i] to out[t, n] for the
// block's sorted tokens; each (t, n) has one writer, so no atomics.
template <int P, bool kVec>
__global__ void lora_expand_kernel(bf16* __restrict__ out, const float* __restrict__ v,
                                   const bf16* __restrict__ b, const int32_t* __restrict__ slots,
                                   const int32_t* __restrict__ order,
                                   const int32_t* __restrict__ num_active, int R, int64_t N) {
  extern __shared__ float vs[];  // [rows of this block, R]
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int begin = int(blockIdx.y) * kRowsPerBlock;
  const int end = min(begin + kRowsPerBlock, *num_active);
  if (begin >= end) return;  // the whole block leaves together, before the barrier
  for (int e = int(threadIdx.x); e < (end - begin) * R; e += int(blockDim.x))
    vs[e] = v[int64_t(begin) * R + e];
  __syncthreads();
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int i = begin; i < end; i++) {
    const int t = order[i];
    const bf16* brow = b + (int64_t(slots[t]) * N + n) * R;
    const float* vi = vs + (i - begin) * R;
    float acc = 0.f;
    for (int j = 0; j < R; j += P) {
      float bv[P];
      cuda::load_n<P, kVec>(brow + j, bv);
#pragma unroll
      for (int q = 0; q < P; q++) acc += bv[q] * vi[j + q];
    }
    bf16* o = out + int64_t(t) * N + n;
    *o = __float2bfloat16_rn(cuda::to_f32(*o) + acc);
  }
}

void check_lora_args(const Tensor& out, const Tensor& x, const LinearLora& lora,
                     const LoraRows& rows) {
  cuda::check_tensor(out, DType::BF16, "lora_add", "out");
  cuda::check_tensor(x, DType::BF16, "lora_add", "x");
  cuda::check_tensor(lora.a, DType::BF16, "lora_add", "a");
  cuda::check_tensor(lora.b, DType::BF16, "lora_add", "b");
  cuda::check_tensor(rows.slots, DType::I32, "lora_add", "slots");
  cuda::check_tensor(rows.order, DType::I32, "lora_add", "order");
  cuda::check_tensor(rows.num_active, DType::I32, "lora_add", "num_active");
  TANDEM_CUDA_REQUIRE(lora.a.ndim() == 3 && lora.b.ndim() == 3,
                      "lora_add: a " + lora.a.shape.str() + " and b " + lora.b.shape.str() +
                          " must be [S, R, K] and [S, N, R]");
  const int64_t S = lora.a.dim(0), R = lora.a.dim(1), K = lora.a.dim(2), N = lora.b.dim(1);
  TANDEM_CUDA_REQUIRE(
      lora.b.dim(0) == S && lora.b.dim(2) == R,
      "lora_add: b " + lora.b.shape.str() + " does not match a " + lora.a.shape.str());
  TANDEM_CUDA_REQUIRE(x.ndim() == 2 && out.ndim() == 2 && x.cols() == K && out.cols() == N &&
                          out.rows() == x.rows(),
                      "lora_add: x " + x.shape.str() + " and out " + out.shape.str() +
                          " must be [T, " + std::to_string(K) + "] and [T, " + std::to_string(N) +
                          "]");
  TANDEM_CUDA_REQUIRE(rows.slots.numel() >= x.rows() && rows.order.numel() >= x.rows(),
                      "lora_add: the step's LoRA rows are shorter than its tokens");
  TANDEM_CUDA_REQUIRE(R >= 1 && R <= kMaxRank, "lora_add: bank rank " + std::to_string(R) +
                                                   " outside [1, " + std::to_string(kMaxRank) +
                                                   "]");
}

}  // namespace

void CudaBackend::lora_add(Tensor& out, const Tensor& x, const LinearLora& lora,
                           const LoraRows& rows) {
  check_lora_args(out, x, lora, rows);
  const int64_t T = x.rows(), K = x.cols(), N = out.cols();
  const int R = int(lora.a.dim(1));
  if (T == 0) return;
  Tensor v = alloc(DType::F32, {T, R});
  const unsigned row_blocks = unsigned(cuda::ceil_div(T, kRowsPerBlock));
  const int32_t* slots = rows.slots.ptr<int32_t>();
  const int32_t* order = rows.order.ptr<int32_t>();
  const int32_t* active = rows.num_active.ptr<int32_t>();

  const bool shrink_vec = K % 8 == 0 && cuda::aligned16(x.data) && cuda::aligned16(lora.a.data);
  auto* shrink = shrink_vec ? &lora_shrink_kernel<8, true> : &lora_shrink_kernel<1, false>;
  cuda::launch_pdl("lora_shrink kernel", shrink, dim3(unsigned(R), row_blocks),
                   dim3(32 * kShrinkWarps), 0, stream(), v.ptr<float>(), x.ptr<bf16>(),
                   lora.a.ptr<bf16>(), slots, order, active, R, K);

  const bool expand_vec = R % 8 == 0 && cuda::aligned16(lora.b.data);
  auto* expand = expand_vec ? &lora_expand_kernel<8, true> : &lora_expand_kernel<1, false>;
  cuda::launch_pdl(
      "lora_expand kernel", expand, dim3(unsigned(cuda::ceil_div(N, kExpandThreads)), row_blocks),
      dim3(kExpandThreads), size_t(kRowsPerBlock) * size_t(R) * sizeof(float), stream(),
      out.ptr<bf16>(), v.ptr<float>(), lora.b.ptr<bf16>(), slots, order, active, R, N);
}

}  // namespace tandem
