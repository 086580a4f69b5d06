// The ops the vision encoders add (model/vision): LayerNorm with a bias (SigLIP) and an
// in-place clamp (Gemma 4's clipped linears).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

namespace {

// y = (x − mean) · rsqrt(var + eps) · w + b; mean and var (the population one, torch's)
// summed in double in a fixed order, the rest in f32.
void layer_norm_row(float* out, const float* x, const float* w, const float* b, int64_t C,
                    float eps) {
  double sum = 0;
  for (int64_t c = 0; c < C; c++) sum += double(x[c]);
  const double mean = sum / double(C);
  double sum_sq = 0;
  for (int64_t c = 0; c < C; c++) sum_sq += (double(x[c]) - mean) * (double(x[c]) - mean);
  const float m = float(mean);
  const float r = 1.f / std::sqrt(float(sum_sq / double(C)) + eps);
  for (int64_t c = 0; c < C; c++) out[c] = (x[c] - m) * r * w[c] + b[c];
}

}  // namespace

// Per row: out = (x − mean) / sqrt(var + eps) · w + b.   out, x [R, C], w, b [C] (f32, bf16
// or f16). In place allowed.
void CpuBackend::layer_norm(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                            float eps) {
  cpu::check_tensor(out, DType::F32, "layer_norm", "out");
  cpu::check_tensor(x, DType::F32, "layer_norm", "x");
  const cpu::F32Weights wf(w, "layer_norm", "w"), bf(b, "layer_norm", "b");
  const int64_t R = x.rows(), C = x.cols();
  TANDEM_CHECK(C > 0 && w.numel() == C && b.numel() == C,
               "layer_norm: w {} and b {} must have {} elements (x {})", w.shape.str(),
               b.shape.str(), C, x.shape.str());
  TANDEM_CHECK(out.rows() == R && out.cols() == C, "layer_norm: out {} must match x {}",
               out.shape.str(), x.shape.str());
  TANDEM_CHECK(eps >= 0.f, "layer_norm: eps {} must be >= 0", eps);
  const float* xp = x.ptr<float>();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, R, 6 * C, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++)
      layer_norm_row(op + r * C, xp + r * C, wf.data(), bf.data(), C, eps);
  });
}

// x = min(max(x, lo), hi), in place; ±inf bounds leave that side open.
void CpuBackend::clamp(Tensor& x, float lo, float hi) {
  cpu::check_tensor(x, DType::F32, "clamp", "x");
  TANDEM_CHECK(!(lo > hi), "clamp: lo {} must not exceed hi {}", lo, hi);
  float* p = x.ptr<float>();
  cpu::parallel_for(*pool_, x.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) p[i] = std::min(std::max(p[i], lo), hi);
  });
}

}  // namespace tandem
