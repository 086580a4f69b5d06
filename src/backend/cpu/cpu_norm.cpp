// Per-row normalization and elementwise ops: rms_norm, add_rms_norm, add, scale, softcap.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

namespace {

// y = x * rsqrt(mean(x²) + eps) * (w + offset), HF order: normalize, then weigh.
// The sum of squares runs in double (fixed order), the rest in f32.
void rms_norm_row(float* out, const float* x, const float* w, int64_t C, float eps, float offset) {
  double sum_sq = 0;
  for (int64_t c = 0; c < C; c++) sum_sq += double(x[c]) * double(x[c]);
  const float var = float(sum_sq / double(C));
  const float r = 1.f / std::sqrt(var + eps);
  for (int64_t c = 0; c < C; c++) out[c] = (x[c] * r) * (w[c] + offset);
}

}  // namespace

// Per row: out = x / rms(x) * (w + weight_offset).   x, out [R, C], w [C] (f32, bf16 or
// f16). In place allowed.
void CpuBackend::rms_norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                          float weight_offset) {
  cpu::check_tensor(out, DType::F32, "rms_norm", "out");
  cpu::check_tensor(x, DType::F32, "rms_norm", "x");
  const cpu::F32Weights widened(w, "rms_norm", "w");
  const int64_t R = x.rows(), C = x.cols();
  TANDEM_CHECK(w.numel() == C, "rms_norm: w {} must have {} elements (x {})", w.shape.str(), C,
               x.shape.str());
  TANDEM_CHECK(out.rows() == R && out.cols() == C, "rms_norm: out {} must match x {}",
               out.shape.str(), x.shape.str());
  TANDEM_CHECK(C > 0, "rms_norm: empty rows in x {}", x.shape.str());
  const float* xp = x.ptr<float>();
  const float* wp = widened.data();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, R, 4 * C, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++)
      rms_norm_row(op + r * C, xp + r * C, wp, C, eps, weight_offset);
  });
}

// residual += x; out = rms_norm(residual).   residual, x, out [R, C], w [C].
// Computes exactly what add() then rms_norm() compute; out may alias x, not residual.
void CpuBackend::add_rms_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w,
                              float eps, float weight_offset) {
  cpu::check_tensor(out, DType::F32, "add_rms_norm", "out");
  cpu::check_tensor(residual, DType::F32, "add_rms_norm", "residual");
  cpu::check_tensor(x, DType::F32, "add_rms_norm", "x");
  const cpu::F32Weights widened(w, "add_rms_norm", "w");
  const int64_t R = residual.rows(), C = residual.cols();
  TANDEM_CHECK(C > 0 && w.numel() == C, "add_rms_norm: w {} must have {} elements (residual {})",
               w.shape.str(), C, residual.shape.str());
  TANDEM_CHECK(x.rows() == R && x.cols() == C && out.rows() == R && out.cols() == C,
               "add_rms_norm: x {} and out {} must match residual {}", x.shape.str(),
               out.shape.str(), residual.shape.str());
  TANDEM_CHECK(out.data != residual.data, "add_rms_norm: out may not alias residual");
  float* rp = residual.ptr<float>();
  const float* xp = x.ptr<float>();
  const float* wp = widened.data();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, R, 5 * C, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++) {
      float* res = rp + r * C;
      const float* xr = xp + r * C;
      for (int64_t c = 0; c < C; c++) res[c] += xr[c];
      rms_norm_row(op + r * C, res, wp, C, eps, weight_offset);
    }
  });
}

// out = a + b.   all the same number of elements. In place allowed.
void CpuBackend::add(Tensor& out, const Tensor& a, const Tensor& b) {
  cpu::check_tensor(out, DType::F32, "add", "out");
  cpu::check_tensor(a, DType::F32, "add", "a");
  cpu::check_tensor(b, DType::F32, "add", "b");
  const int64_t n = out.numel();
  TANDEM_CHECK(a.numel() == n && b.numel() == n, "add: shapes out {} a {} b {} differ in size",
               out.shape.str(), a.shape.str(), b.shape.str());
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) op[i] = ap[i] + bp[i];
  });
}

// x *= s, in place.
void CpuBackend::scale(Tensor& x, float s) {
  cpu::check_tensor(x, DType::F32, "scale", "x");
  float* p = x.ptr<float>();
  cpu::parallel_for(*pool_, x.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) p[i] *= s;
  });
}

// x = cap * tanh(x / cap), in place.
void CpuBackend::softcap(Tensor& x, float cap) {
  cpu::check_tensor(x, DType::F32, "softcap", "x");
  TANDEM_CHECK(cap > 0.f, "softcap: cap {} must be positive", cap);
  float* p = x.ptr<float>();
  cpu::parallel_for(*pool_, x.numel(), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) p[i] = cap * std::tanh(p[i] / cap);
  });
}

}  // namespace tandem
