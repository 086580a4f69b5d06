// Gated activations of the MLP: out = act(gate) * up, for dense MLPs and MoE experts.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_vec_math.h"

namespace tandem {

namespace cpu {

namespace {

// torch.nn.functional.silu: x * sigmoid(x), computed as x / (1 + e^-x).
inline float silu(float x) {
  return x / (1.f + std::exp(-x));
}

// torch gelu(approximate="tanh") (HF "gelu_pytorch_tanh").
inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace

void gated_act_rows(float* out, const float* gate_up, int64_t rows, int64_t f, Activation act) {
  for (int64_t r = 0; r < rows; r++) {
    const float* gate = gate_up + r * 2 * f;
    const float* up = gate + f;
    float* o = out + r * f;
    int64_t i = 0;
    // Eight lanes at a time (cpu_vec_math.h), the scalar reference for the tail.
    switch (act) {
      case Activation::SiLU:
        for (; i + 8 <= f; i += 8)
          _mm256_storeu_ps(o + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
        for (; i < f; i++) o[i] = silu(gate[i]) * up[i];
        break;
      case Activation::GeluTanh:
        for (; i + 8 <= f; i += 8)
          _mm256_storeu_ps(o + i,
                           _mm256_mul_ps(gelu_tanh8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
        for (; i < f; i++) o[i] = gelu_tanh(gate[i]) * up[i];
        break;
    }
  }
}

}  // namespace cpu

// out = act(gate) * up, where gate_up = [gate | up].   out [T, F], gate_up [T, 2F]
void CpuBackend::gated_act(Tensor& out, const Tensor& gate_up, Activation act) {
  cpu::check_tensor(out, DType::F32, "gated_act", "out");
  cpu::check_tensor(gate_up, DType::F32, "gated_act", "gate_up");
  const int64_t T = gate_up.rows(), F = out.cols();
  TANDEM_CHECK(gate_up.cols() == 2 * F && out.rows() == T,
               "gated_act: gate_up {} must be [T, 2F] for out {} = [T, F]", gate_up.shape.str(),
               out.shape.str());
  TANDEM_CHECK(out.data != gate_up.data, "gated_act: out may not alias gate_up");
  const float* g = gate_up.ptr<float>();
  float* o = out.ptr<float>();
  cpu::parallel_for(*pool_, T, 16 * F, [&](int64_t begin, int64_t end) {
    cpu::gated_act_rows(o + begin * F, g + begin * 2 * F, end - begin, F, act);
  });
}

}  // namespace tandem
