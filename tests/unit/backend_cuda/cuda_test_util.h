// Shared helpers of the CUDA-vs-CPU tests: both backends get the same inputs (random
// values rounded to bf16 first, so the CPU twin sees exactly what the GPU stores), GPU
// outputs start as NaN so an element a kernel forgets to write fails the comparison, and
// results are compared by ‖gpu − cpu‖ / ‖cpu‖.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "../backend/backend_test_util.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"

namespace tandem::test {

// Every test starts with this: the tests only run where a GPU is.
#define TANDEM_SKIP_WITHOUT_CUDA() \
  if (::tandem::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine"

constexpr double kBf16Tol = 1e-2;  // bf16 storage, f32 arithmetic vs the f32 CPU twin

// RoPE over the first rotary_dim dims of a head, base 10000.
inline RopeSpec rope_spec(int rotary_dim, float attention_factor = 1.f) {
  RopeSpec s;
  s.rotary_dim = rotary_dim;
  for (int i = 0; i < rotary_dim / 2; i++)
    s.inv_freq.push_back(float(1.0 / std::pow(10000.0, 2.0 * i / rotary_dim)));
  s.attention_factor = attention_factor;
  return s;
}

// The CPU reference and the GPU under test.
struct Backends {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<CudaBackend> gpu = std::make_unique<CudaBackend>(0);
};

// n random values in [lo, hi), rounded to bf16.
inline std::vector<float> random_bf16(std::mt19937& rng, size_t n, float lo = -1.f,
                                      float hi = 1.f) {
  std::vector<float> v = random_vec(rng, n, lo, hi);
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

// The same values on a backend in its activation dtype (f32 on the CPU, bf16 on CUDA), or
// in `dtype` when given.
inline Tensor put(Backend& be, const std::vector<float>& v, Shape shape) {
  return be.upload(host_f32(v, shape), be.act_dtype());
}
inline Tensor put_as(Backend& be, const std::vector<float>& v, Shape shape, DType dtype) {
  return be.upload(host_f32(v, shape), dtype);
}
inline Tensor put_i32(Backend& be, const std::vector<int32_t>& v, Shape shape) {
  return be.upload(host_i32(v, shape), DType::I32);
}

// A fresh GPU tensor whose every element is NaN (float dtypes) or INT32_MIN (i32).
inline Tensor poisoned(Backend& gpu, DType dtype, Shape shape) {
  if (dtype == DType::I32)
    return gpu.upload(host_i32(std::vector<int32_t>(size_t(shape.numel()),
                                                    std::numeric_limits<int32_t>::min()),
                               shape),
                      DType::I32);
  return gpu.upload(
      host_f32(std::vector<float>(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN()),
               shape),
      dtype);
}

// ‖gpu − cpu‖ / ‖cpu‖ of two backend tensors (NaN when any GPU element is NaN).
inline double rel_err_between(Backend& gpu, const Tensor& g, Backend& cpu, const Tensor& c) {
  return rel_err(to_vec(gpu, g), to_vec(cpu, c));
}

}  // namespace tandem::test
