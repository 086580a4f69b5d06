// segment_sum on CUDA: the runs of rows an embedding row pools (model/pooled_hidden.h),
// summed in f32. Each thread owns one column of one run and adds its rows in order, so the
// sum is the same whatever the launch (and the CPU twin's order: cpu_pool.cpp).
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

constexpr int kThreads = 256;

// ---------------------------------------------------------------- kernels

// out[e, c] = Σ x[q, c] for q in [starts[e], starts[e+1]), clamped to [0, Q) (the engine
// writes the starts; a kernel cannot throw, so a bad run sums what it can).
//   out [E, D] f32, x [Q, D] (T: bf16 or f32), starts [E+1]. Grid (E, ⌈D / kThreads⌉).
template <typename T>
__global__ void segment_sum_kernel(float* __restrict__ out, const T* __restrict__ x,
                                   const int32_t* __restrict__ starts, int64_t Q, int64_t D) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t e = blockIdx.x;
  const int64_t c = int64_t(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= D) return;
  const int64_t begin = max(int64_t(0), int64_t(starts[e]));
  const int64_t end = min(Q, int64_t(starts[e + 1]));
  float sum = 0.f;
  for (int64_t q = begin; q < end; q++) sum += cuda::to_f32(x[q * D + c]);
  out[e * D + c] = sum;
}

}  // namespace

// ---------------------------------------------------------------- launcher

void CudaBackend::segment_sum(Tensor& out, const Tensor& x, const Tensor& starts) {
  cuda::check_tensor(out, DType::F32, "segment_sum", "out");
  cuda::check_float(x, "segment_sum", "x");
  cuda::check_tensor(starts, DType::I32, "segment_sum", "starts");
  const int64_t E = starts.numel() - 1, Q = x.rows(), D = x.cols();
  TANDEM_CUDA_REQUIRE(E >= 0 && out.rows() == E && out.cols() == D,
                      "segment_sum: " + cuda::shape_of("out", out) + " must be [" +
                          std::to_string(E) + ", " + std::to_string(D) + "] for " +
                          cuda::shape_of("starts", starts));
  TANDEM_CUDA_REQUIRE(out.data != x.data, "segment_sum: out may not alias x");
  if (E == 0 || D == 0) return;
  const dim3 grid(unsigned(E), unsigned(cuda::ceil_div(D, kThreads)));
  if (x.dtype == DType::BF16)
    cuda::launch_pdl("segment_sum_kernel", &segment_sum_kernel<cuda::bf16>, grid, dim3(kThreads), 0,
                     stream_, out.ptr<float>(), x.ptr<cuda::bf16>(), starts.ptr<int32_t>(), Q, D);
  else
    cuda::launch_pdl("segment_sum_kernel", &segment_sum_kernel<float>, grid, dim3(kThreads), 0,
                     stream_, out.ptr<float>(), x.ptr<float>(), starts.ptr<int32_t>(), Q, D);
}

}  // namespace tandem
