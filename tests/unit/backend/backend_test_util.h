// Shared helpers of the backend tests: random inputs, host <-> device, the error metric.
// References in the tests are plain loops in double; they are compared to the backend's
// f32 results with the relative error ‖a − b‖ / ‖b‖.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace tandem::test {

// Seeds every randomized test runs: fixed ones, plus one fresh per run (reported on
// failure through SCOPED_TRACE so the case can be replayed).
inline std::vector<uint32_t> test_seeds() {
  static const uint32_t fresh = std::random_device{}();
  return {1u, 2u, 12345u, fresh};
}

inline std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor host_f32(const std::vector<float>& v, Shape shape) {
  EXPECT_EQ(int64_t(v.size()), shape.numel());
  Tensor t = Tensor::empty_host(DType::F32, shape);
  std::copy(v.begin(), v.end(), t.ptr<float>());
  return t;
}

inline Tensor host_i32(const std::vector<int32_t>& v, Shape shape) {
  EXPECT_EQ(int64_t(v.size()), shape.numel());
  Tensor t = Tensor::empty_host(DType::I32, shape);
  std::copy(v.begin(), v.end(), t.ptr<int32_t>());
  return t;
}

inline Tensor device_f32(Backend& be, const std::vector<float>& v, Shape shape) {
  return be.upload(host_f32(v, shape), DType::F32);
}

inline Tensor device_i32(Backend& be, const std::vector<int32_t>& v, Shape shape) {
  return be.upload(host_i32(v, shape), DType::I32);
}

inline std::vector<float> to_vec(Backend& be, const Tensor& t) {
  Tensor h = be.to_host_f32(t);
  return std::vector<float>(h.ptr<float>(), h.ptr<float>() + h.numel());
}

// ‖a − b‖ / ‖b‖ (absolute error when b is zero).
inline double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_err(a, std::vector<double>(b.begin(), b.end()));
}

constexpr double kTol = 1e-5;  // f32 op vs double reference

inline std::string seed_trace(uint32_t seed) {
  return "seed " + std::to_string(seed);
}

}  // namespace tandem::test
