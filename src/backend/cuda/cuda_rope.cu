// Rotary position embeddings on CUDA, HF "rotate_half" layout, the function cpu_rope.cpp
// computes: dims i and i + rotary_dim/2 of each head rotate by position * inv_freq[i]
// (f32 product, then cosf/sinf, scaled by attention_factor); dims >= rotary_dim pass.
//
// The spec's inv_freq table travels inside the kernel's parameters (at most kMaxHalf
// floats): no upload, no cache, and a captured CUDA graph keeps its own copy. Dynamic NTK
// needs each row's length (largest position + 1), found by a small per-row kernel first.
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_common.h"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kMaxHalf = 512;  // rotary_dim <= 1024

// The spec as the kernel sees it, passed by value (about 2 KB of kernel parameters).
struct RopeArgs {
  float inv_freq[kMaxHalf];  // [half]
  int half = 0;              // rotary_dim / 2
  float attention_factor = 1.f;
  float dynamic_factor = 0.f;  // 0 = not dynamic
  int original_max_position = 0;
  float base = 10000.f;
};

// ---------------------------------------------------------------- kernels

// row_len[t] = 1 + the largest position of t's row, for every token of the row.
//   positions [T], seq_starts [B+1], row_len [T]. One block per row.
__global__ void row_length_kernel(int32_t* __restrict__ row_len,
                                  const int32_t* __restrict__ positions,
                                  const int32_t* __restrict__ seq_starts) {
  __shared__ int32_t warp_max[32];
  const int32_t begin = seq_starts[blockIdx.x], end = seq_starts[blockIdx.x + 1];
  int32_t m = -1;
  for (int32_t t = begin + int32_t(threadIdx.x); t < end; t += int32_t(blockDim.x))
    m = max(m, positions[t]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : -1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) warp_max[0] = m;
  }
  __syncthreads();
  const int32_t len = warp_max[0] + 1;
  for (int32_t t = begin + int32_t(threadIdx.x); t < end; t += int32_t(blockDim.x))
    row_len[t] = len;
}

// inv_freq[i] of a token: the spec's, or HF's dynamic-NTK one for a row of length L beyond
// the original context: base * (factor * L / original - (factor - 1))^(d / (d - 2)).
__device__ __forceinline__ float token_inv_freq(const RopeArgs& a, int i, int32_t L) {
  if (a.dynamic_factor <= 0.f || L <= a.original_max_position) return a.inv_freq[i];
  const int dim = 2 * a.half;
  const float ratio =
      a.dynamic_factor * float(L) / float(a.original_max_position) - (a.dynamic_factor - 1.f);
  const float base = a.base * powf(ratio, float(double(dim) / double(dim - 2)));
  return 1.f / powf(base, float(2 * i) / float(dim));
}

// Rotates the H heads of one token per block.   x [T, H, Dh], positions [T],
// row_len [T] (only read when dynamic)
__global__ void rope_kernel(bf16* __restrict__ x, const int32_t* __restrict__ positions,
                            const int32_t* __restrict__ row_len, int64_t H, int64_t Dh,
                            const RopeArgs args) {
  __shared__ float cs[2 * kMaxHalf];  // [cos (half) | sin (half)], scaled
  const int64_t t = blockIdx.x;
  const int half = args.half;
  const float p = float(positions[t]);
  const int32_t L = args.dynamic_factor > 0.f ? row_len[t] : 0;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = p * token_inv_freq(args, i, L);
    cs[i] = cosf(angle) * args.attention_factor;
    cs[half + i] = sinf(angle) * args.attention_factor;
  }
  __syncthreads();
  bf16* row = x + t * H * Dh;
  for (int64_t j = threadIdx.x; j < H * half; j += blockDim.x) {
    const int64_t h = j / half;
    const int i = int(j - h * half);
    bf16* head = row + h * Dh;
    const float x1 = __bfloat162float(head[i]), x2 = __bfloat162float(head[i + half]);
    head[i] = __float2bfloat16_rn(x1 * cs[i] - x2 * cs[half + i]);
    head[i + half] = __float2bfloat16_rn(x2 * cs[i] + x1 * cs[half + i]);
  }
}

// ---------------------------------------------------------------- launch helpers

void check_rope_spec(const RopeSpec& spec, int64_t head_dim) {
  TANDEM_CUDA_REQUIRE(spec.rotary_dim > 0 && spec.rotary_dim % 2 == 0 &&
                          spec.rotary_dim <= head_dim && spec.rotary_dim / 2 <= kMaxHalf,
                      "rope: rotary_dim " + std::to_string(spec.rotary_dim) +
                          " must be even and in (0, min(head_dim " + std::to_string(head_dim) +
                          ", " + std::to_string(2 * kMaxHalf) + ")]");
  TANDEM_CUDA_REQUIRE(int(spec.inv_freq.size()) == spec.rotary_dim / 2,
                      "rope: inv_freq has " + std::to_string(spec.inv_freq.size()) +
                          " entries, rotary_dim " + std::to_string(spec.rotary_dim) + " needs " +
                          std::to_string(spec.rotary_dim / 2));
  if (spec.dynamic_factor > 0.f)
    TANDEM_CUDA_REQUIRE(spec.original_max_position > 0 && spec.rotary_dim > 2,
                        "rope: dynamic NTK needs original_max_position > 0 and rotary_dim > 2");
}

RopeArgs make_args(const RopeSpec& spec) {
  RopeArgs a{};
  a.half = spec.rotary_dim / 2;
  for (int i = 0; i < a.half; i++) a.inv_freq[i] = spec.inv_freq[size_t(i)];
  a.attention_factor = spec.attention_factor;
  a.dynamic_factor = spec.dynamic_factor;
  a.original_max_position = spec.original_max_position;
  a.base = spec.base;
  return a;
}

}  // namespace

// ---------------------------------------------------------------- launcher

// Rotates each head in place.   x [T, H, Dh], step.positions [T] i32
void CudaBackend::rope(Tensor& x, const StepTensors& step, const RopeSpec& spec) {
  cuda::check_tensor(x, DType::BF16, "rope", "x");
  TANDEM_CUDA_REQUIRE(x.ndim() == 3, "rope: x must be [T, H, Dh], got " + x.shape.str());
  cuda::check_tensor(step.positions, DType::I32, "rope", "step.positions");
  const int64_t T = x.dim(0), H = x.dim(1), Dh = x.dim(2);
  TANDEM_CUDA_REQUIRE(T == step.num_tokens && step.positions.numel() >= T,
                      "rope: x " + x.shape.str() + " vs step with " +
                          std::to_string(step.num_tokens) + " tokens, positions " +
                          step.positions.shape.str());
  check_rope_spec(spec, Dh);
  if (T == 0 || H == 0) return;
  const RopeArgs args = make_args(spec);
  Tensor row_len;
  if (spec.dynamic_factor > 0.f) {
    cuda::check_tensor(step.seq_starts, DType::I32, "rope", "step.seq_starts");
    TANDEM_CUDA_REQUIRE(step.num_rows > 0 && step.seq_starts.numel() >= step.num_rows + 1,
                        "rope: step has " + std::to_string(step.num_rows) +
                            " rows but seq_starts " + step.seq_starts.shape.str());
    row_len = alloc(DType::I32, {T});
    row_length_kernel<<<unsigned(step.num_rows), 256, 0, stream_>>>(
        row_len.ptr<int32_t>(), step.positions.ptr<int32_t>(), step.seq_starts.ptr<int32_t>());
    TANDEM_CUDA_LAUNCHED("row_length_kernel");
  }
  const int threads = int(std::min<int64_t>(256, std::max<int64_t>(32, H * args.half)));
  rope_kernel<<<unsigned(T), threads, 0, stream_>>>(
      x.ptr<bf16>(), step.positions.ptr<int32_t>(),
      row_len.defined() ? row_len.ptr<int32_t>() : nullptr, H, Dh, args);
  TANDEM_CUDA_LAUNCHED("rope_kernel");
}

}  // namespace tandem
