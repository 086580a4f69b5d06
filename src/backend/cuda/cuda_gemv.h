// The few-row linear (decode of 1–2 rows) as a weight stream: cuda_gemv.cu. Host header,
// safe for nvcc and g++.
#pragma once

#include "backend/backend.h"

namespace tandem {

class CudaBackend;

// Rows of x the weight stream takes; more rows go to cuBLASLt, whose tensor-core tiles win
// once the weights are reused across rows.
inline constexpr int kGemvMaxRows = 2;

// out [T, N] = x [T, K] · w [N, K]ᵀ (+ bias [N]) when the weight stream takes the shape
// (the backend's CudaOptions::gemv on, 1 <= T <= kGemvMaxRows, K % 8 == 0, x and w 16-byte
// aligned, x small enough to stage in shared memory); then it launches and returns true. Otherwise
// it launches nothing and returns false. The caller has validated dtypes and shapes
// (CudaBackend::linear).
bool try_gemv(CudaBackend& backend, Tensor& out, const Tensor& x, const Tensor& w,
              const Tensor& bias);

}  // namespace tandem
