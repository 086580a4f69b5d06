// The ops the vision encoders add (model/vision), on CUDA: LayerNorm with a bias (SigLIP)
// and an in-place clamp (Gemma 4's clipped linears). CPU twins: cpu/cpu_vision_ops.cpp.
// Storage bf16 or f32, weights bf16 or f32, arithmetic f32; per row, so a row's result
// never depends on the others.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"

namespace tandem {

namespace {

using cuda::bf16;

// One block per row: y = (x − mean) · rsqrt(var + eps) · w + b, mean and population var
// in f32, the var from a second pass over the deviations. Thread g handles the same
// elements in every pass, so in place it writes only what it read itself.   x, out [R, C]
template <typename T, typename W>
__global__ void layer_norm_kernel(T* out, const T* x, const W* w, const W* b, int64_t C,
                                  float eps) {
  __shared__ float scratch[32];
  const T* row = x + int64_t(blockIdx.x) * C;
  T* dst = out + int64_t(blockIdx.x) * C;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += cuda::to_f32(row[c]);
  const float mean = cuda::block_sum(sum, scratch) / float(C);
  float dev = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = cuda::to_f32(row[c]) - mean;
    dev += d * d;
  }
  const float inv = rsqrtf(cuda::block_sum(dev, scratch) / float(C) + eps);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    dst[c] = cuda::from_f32<T>((cuda::to_f32(row[c]) - mean) * inv * cuda::to_f32(w[c]) +
                               cuda::to_f32(b[c]));
  }
}

template <typename T>
__global__ void clamp_kernel(T* x, int64_t n, float lo, float hi) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    x[i] = cuda::from_f32<T>(fminf(fmaxf(cuda::to_f32(x[i]), lo), hi));
  }
}

constexpr int kThreads = 256;

template <typename T, typename W>
void launch_layer_norm(cudaStream_t s, T* out, const T* x, const Tensor& w, const Tensor& b,
                       int64_t R, int64_t C, float eps) {
  const int threads = int(std::clamp<int64_t>(cuda::ceil_div(C, 32), 1, 16)) * 32;
  layer_norm_kernel<T, W><<<unsigned(R), threads, 0, s>>>(out, x, w.ptr<W>(), b.ptr<W>(), C, eps);
}

}  // namespace

// Per row: out = (x − mean) / sqrt(var + eps) · w + b.   out, x [R, C], w, b [C] of one
// float dtype. In place allowed.
void CudaBackend::layer_norm(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                             float eps) {
  cuda::check_float(out, "layer_norm", "out");
  cuda::check_tensor(x, out.dtype, "layer_norm", "x");
  cuda::check_float(w, "layer_norm", "w");
  cuda::check_tensor(b, w.dtype, "layer_norm", "b");
  const int64_t R = x.rows(), C = x.cols();
  TANDEM_CUDA_REQUIRE(
      C > 0 && w.numel() == C && b.numel() == C && out.rows() == R && out.cols() == C,
      "layer_norm: w " + w.shape.str() + ", b " + b.shape.str() + " and out " + out.shape.str() +
          " must fit x " + x.shape.str());
  TANDEM_CUDA_REQUIRE(R <= int64_t(0x7fffffff), "layer_norm: too many rows");
  if (R == 0) return;
  auto with_w = [&](auto* op, const auto* xp) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(op)>>;
    if (w.dtype == DType::BF16)
      launch_layer_norm<T, bf16>(stream_, op, xp, w, b, R, C, eps);
    else
      launch_layer_norm<T, float>(stream_, op, xp, w, b, R, C, eps);
  };
  if (out.dtype == DType::BF16)
    with_w(out.ptr<bf16>(), x.ptr<bf16>());
  else
    with_w(out.ptr<float>(), x.ptr<float>());
  TANDEM_CUDA_LAUNCHED("layer_norm kernel");
}

// x = min(max(x, lo), hi), in place.
void CudaBackend::clamp(Tensor& x, float lo, float hi) {
  cuda::check_float(x, "clamp", "x");
  TANDEM_CUDA_REQUIRE(!(lo > hi), "clamp: lo must not exceed hi");
  const int64_t n = x.numel();
  if (n == 0) return;
  const unsigned blocks = cuda::grid_stride_blocks(n, kThreads);
  if (x.dtype == DType::BF16)
    clamp_kernel<<<blocks, kThreads, 0, stream_>>>(x.ptr<bf16>(), n, lo, hi);
  else
    clamp_kernel<<<blocks, kThreads, 0, stream_>>>(x.ptr<float>(), n, lo, hi);
  TANDEM_CUDA_LAUNCHED("clamp kernel");
}

}  // namespace tandem
