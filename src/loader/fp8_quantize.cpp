#include "loader/fp8_quantize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace tandem {

float fp8_row_scale(float amax) {
  return bf16_to_f32(f32_to_bf16(std::max(amax, 1e-12f) / 448.f));
}

Fp8Rows quantize_fp8_per_channel(const Tensor& w) {
  if (w.device != Device::CPU || w.ndim() != 2)
    fail("quantize_fp8_per_channel: want a host [N, K] tensor, got {}", w.shape.str());
  if (w.dtype == DType::I32 || w.dtype == DType::F8E4M3)
    fail("quantize_fp8_per_channel: {} weights cannot be quantized", dtype_name(w.dtype));
  const int64_t N = w.rows(), K = w.cols();
  Fp8Rows out{Tensor::empty_host(DType::F8E4M3, {N, K}), Tensor::empty_host(DType::BF16, {N, 1})};
  const size_t row_bytes = size_t(K) * dtype_size(w.dtype);
  const char* src = static_cast<const char*>(w.data);
  uint8_t* q = out.weight.ptr<uint8_t>();
  uint16_t* s = out.scale.ptr<uint16_t>();
  ThreadPool::global().parallel_for(N, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = begin; n < end; n++) {
      convert_to_f32(src + size_t(n) * row_bytes, w.dtype, row.data(), size_t(K));
      float amax = 0.f;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      const float scale = fp8_row_scale(amax);
      s[n] = f32_to_bf16(scale);
      for (int64_t k = 0; k < K; k++) q[n * K + k] = f32_to_f8e4m3(row[size_t(k)] / scale);
    }
  });
  return out;
}

}  // namespace tandem
