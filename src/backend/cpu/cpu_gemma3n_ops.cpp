// The ops Gemma 3n added to the Backend: elementwise sub / mul / act_mul, activation
// sparsity (gaussian_topk), AltUp's stream magnitude matching (match_rms) and per-token
// stream mixing (mix_streams), and swap_leading_dims for the per-layer inputs.
// Every op is per row (or per token), so a row's results never depend on other rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

namespace {

// The same formulas as cpu_activation.cpp's gated activations (same bits).
inline float activate(float x, Activation act) {
  switch (act) {
    case Activation::SiLU:
      return x / (1.f + std::exp(-x));
    case Activation::GeluTanh: {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
  }
  return x;
}

// mean(x²) of one row, summed in double in a fixed order.
float mean_square(const float* x, int64_t C) {
  double sum_sq = 0;
  for (int64_t c = 0; c < C; c++) sum_sq += double(x[c]) * double(x[c]);
  return float(sum_sq / double(C));
}

void check_same_size(const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  TANDEM_CHECK(a.numel() == out.numel() && b.numel() == out.numel(),
               "{}: shapes out {} a {} b {} differ in size", op, out.shape.str(), a.shape.str(),
               b.shape.str());
}

}  // namespace

// out = a - b.   all the same number of elements. In place allowed.
void CpuBackend::sub(Tensor& out, const Tensor& a, const Tensor& b) {
  cpu::check_tensor(out, DType::F32, "sub", "out");
  cpu::check_tensor(a, DType::F32, "sub", "a");
  cpu::check_tensor(b, DType::F32, "sub", "b");
  check_same_size(out, a, b, "sub");
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, out.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) op[i] = ap[i] - bp[i];
  });
}

// out = a * b, b of a's size or one row [C] broadcast over a's rows. In place allowed.
void CpuBackend::mul(Tensor& out, const Tensor& a, const Tensor& b) {
  cpu::check_tensor(out, DType::F32, "mul", "out");
  cpu::check_tensor(a, DType::F32, "mul", "a");
  const cpu::F32Weights widened(b, "mul", "b");  // b may be a weight row
  const int64_t n = a.numel(), C = a.cols();
  const bool broadcast = b.numel() != n;
  TANDEM_CHECK(out.numel() == n && (!broadcast || b.numel() == C),
               "mul: b {} must match a {} or be one row of {}; out {}", b.shape.str(),
               a.shape.str(), C, out.shape.str());
  const float* ap = a.ptr<float>();
  const float* bp = widened.data();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) op[i] = ap[i] * bp[broadcast ? i % C : i];
  });
}

// out = act(a) * b.   out, a, b [R, C]
void CpuBackend::act_mul(Tensor& out, const Tensor& a, const Tensor& b, Activation act) {
  cpu::check_tensor(out, DType::F32, "act_mul", "out");
  cpu::check_tensor(a, DType::F32, "act_mul", "a");
  cpu::check_tensor(b, DType::F32, "act_mul", "b");
  check_same_size(out, a, b, "act_mul");
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, out.numel(), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) op[i] = activate(ap[i], act) * bp[i];
  });
}

// Per row: x = relu(x - (mean + std · k)). Mean and variance run in double (two passes,
// fixed order); the cutoff and the subtraction in f32, as HF does in fp32.
void CpuBackend::gaussian_topk(Tensor& x, float std_multiplier) {
  cpu::check_tensor(x, DType::F32, "gaussian_topk", "x");
  const int64_t R = x.rows(), C = x.cols();
  TANDEM_CHECK(C > 0, "gaussian_topk: empty rows in x {}", x.shape.str());
  float* xp = x.ptr<float>();
  cpu::parallel_for(*pool_, R, 4 * C, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++) {
      float* row = xp + r * C;
      double sum = 0, sum_dev = 0;
      for (int64_t c = 0; c < C; c++) sum += row[c];
      const double mean = sum / double(C);
      for (int64_t c = 0; c < C; c++) sum_dev += (row[c] - mean) * (row[c] - mean);
      const float std_dev = float(std::sqrt(sum_dev / double(C)));
      const float cutoff = float(mean) + std_dev * std_multiplier;
      for (int64_t c = 0; c < C; c++) row[c] = std::max(row[c] - cutoff, 0.f);
    }
  });
}

// Per row: x = x · rms(ref) / sqrt(max(mean(x²), floor)), in HF's order (multiply, divide).
void CpuBackend::match_rms(Tensor& x, const Tensor& ref, float min_mean_square) {
  cpu::check_tensor(x, DType::F32, "match_rms", "x");
  cpu::check_tensor(ref, DType::F32, "match_rms", "ref");
  const int64_t R = x.rows(), C = x.cols();
  TANDEM_CHECK(ref.rows() == R && ref.cols() == C && C > 0,
               "match_rms: ref {} must match x {} (non-empty rows)", ref.shape.str(),
               x.shape.str());
  float* xp = x.ptr<float>();
  const float* rp = ref.ptr<float>();
  cpu::parallel_for(*pool_, R, 4 * C, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++) {
      float* row = xp + r * C;
      const float target = std::sqrt(mean_square(rp + r * C, C));
      const float current = std::sqrt(std::max(mean_square(row, C), min_mean_square));
      for (int64_t c = 0; c < C; c++) row[c] = row[c] * target / current;
    }
  });
}

// out[m, t] += Σ_s coefs[t, m·S + s] · x[s, t].   out [M, T, C], x [S, T, C], coefs [T, M·S]
void CpuBackend::mix_streams(Tensor& out, const Tensor& x, const Tensor& coefs) {
  cpu::check_tensor(out, DType::F32, "mix_streams", "out");
  cpu::check_tensor(x, DType::F32, "mix_streams", "x");
  cpu::check_tensor(coefs, DType::F32, "mix_streams", "coefs");
  cpu::check_ndim(out, 3, "mix_streams", "out");
  cpu::check_ndim(x, 3, "mix_streams", "x");
  const int64_t M = out.dim(0), S = x.dim(0), T = x.dim(1), C = x.dim(2);
  TANDEM_CHECK(out.dim(1) == T && out.dim(2) == C && coefs.rows() == T && coefs.cols() == M * S,
               "mix_streams: out {} x {} coefs {} must be [M, T, C], [S, T, C], [T, M·S]",
               out.shape.str(), x.shape.str(), coefs.shape.str());
  TANDEM_CHECK(out.data != x.data, "mix_streams: out may not alias x");
  const float* xp = x.ptr<float>();
  const float* kp = coefs.ptr<float>();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, T, 2 * M * S * C, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(C));
    for (int64_t t = begin; t < end; t++)
      for (int64_t m = 0; m < M; m++) {
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t s = 0; s < S; s++) {
          const float k = kp[t * M * S + m * S + s];
          const float* xs = xp + (s * T + t) * C;
          for (int64_t c = 0; c < C; c++) acc[size_t(c)] += k * xs[c];
        }
        float* o = op + (m * T + t) * C;
        for (int64_t c = 0; c < C; c++) o[c] += acc[size_t(c)];
      }
  });
}

// out[b, a] = x[a, b].   out [B, A, C], x [A, B, C]
void CpuBackend::swap_leading_dims(Tensor& out, const Tensor& x) {
  cpu::check_tensor(out, DType::F32, "swap_leading_dims", "out");
  cpu::check_tensor(x, DType::F32, "swap_leading_dims", "x");
  cpu::check_ndim(out, 3, "swap_leading_dims", "out");
  cpu::check_ndim(x, 3, "swap_leading_dims", "x");
  const int64_t A = x.dim(0), B = x.dim(1), C = x.dim(2);
  TANDEM_CHECK(out.dim(0) == B && out.dim(1) == A && out.dim(2) == C,
               "swap_leading_dims: out {} must be x {} with its two leading dims swapped",
               out.shape.str(), x.shape.str());
  TANDEM_CHECK(out.data != x.data, "swap_leading_dims: out may not alias x");
  const float* xp = x.ptr<float>();
  float* op = out.ptr<float>();
  cpu::parallel_for(*pool_, A * B, C, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) {
      const int64_t a = i / B, b = i % B;
      std::copy(xp + i * C, xp + (i + 1) * C, op + (b * A + a) * C);
    }
  });
}

}  // namespace tandem
