// LoRA on the CPU (Backend::lora_add): the step's tokens grouped by slot, each group one
// pair of products through the same GEMM kernels as the base linear —
//   v = x_s · A[s]ᵀ   [n_s, R],   out_s += v · B[s]ᵀ   [n_s, N].
// The kernels compute each output element as one fixed-order dot product (cpu_gemm.h), so
// a token's result does not depend on which other tokens share its group. Slot 0 (the
// base model) is skipped: a step without adapter rows costs one scan of `slots`.
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_gemm.h"

namespace tandem {

namespace {

void check_lora_shapes(const Tensor& out, const Tensor& x, const LinearLora& lora,
                       const Tensor& slots) {
  cpu::check_tensor(out, DType::F32, "lora_add", "out");
  cpu::check_tensor(x, DType::F32, "lora_add", "x");
  cpu::check_tensor(lora.a, DType::F32, "lora_add", "a");
  cpu::check_tensor(lora.b, DType::F32, "lora_add", "b");
  cpu::check_tensor(slots, DType::I32, "lora_add", "slots");
  cpu::check_ndim(lora.a, 3, "lora_add", "a");
  cpu::check_ndim(lora.b, 3, "lora_add", "b");
  const int64_t S = lora.a.dim(0), R = lora.a.dim(1), K = lora.a.dim(2), N = lora.b.dim(1);
  TANDEM_CHECK(lora.b.dim(0) == S && lora.b.dim(2) == R,
               "lora_add: b {} does not match a {} (slots {}, rank {})", lora.b.shape.str(),
               lora.a.shape.str(), S, R);
  TANDEM_CHECK(x.cols() == K && out.cols() == N && out.rows() == x.rows(),
               "lora_add: x {} and out {} must be [T, {}] and [T, {}]", x.shape.str(),
               out.shape.str(), K, N);
  TANDEM_CHECK(slots.numel() >= x.rows(), "lora_add: {} slots for {} tokens", slots.numel(),
               x.rows());
}

}  // namespace

void CpuBackend::lora_add(Tensor& out, const Tensor& x, const LinearLora& lora,
                          const LoraRows& rows) {
  const Tensor& slots = rows.slots;
  check_lora_shapes(out, x, lora, slots);
  const int64_t T = x.rows(), S = lora.a.dim(0), R = lora.a.dim(1), K = x.cols(),
                N = out.cols();
  const int32_t* slot = slots.ptr<int32_t>();
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(S));  // [S] tokens of each slot
  for (int64_t t = 0; t < T; t++) {
    TANDEM_CHECK(slot[t] >= 0 && slot[t] < S, "lora_add: slot {} of token {} is outside [0, {})",
                 slot[t], t, S);
    if (slot[t] > 0) groups[size_t(slot[t])].push_back(t);
  }
  const float* xs = x.ptr<float>();
  float* o = out.ptr<float>();
  std::vector<float> gathered, shrunk, expanded;
  for (int64_t s = 1; s < S; s++) {
    const std::vector<int64_t>& tokens = groups[size_t(s)];
    if (tokens.empty()) continue;
    const int64_t n = int64_t(tokens.size());
    gathered.resize(size_t(n * K));
    shrunk.resize(size_t(n * R));
    expanded.resize(size_t(n * N));
    for (int64_t i = 0; i < n; i++)
      std::copy(xs + tokens[size_t(i)] * K, xs + (tokens[size_t(i)] + 1) * K, gathered.data() + i * K);
    const float* a = lora.a.ptr<float>() + s * R * K;
    const float* b = lora.b.ptr<float>() + s * N * R;
    cpu::gemm_xwt(*pool_, shrunk.data(), gathered.data(), a, DType::F32, n, R, K);
    cpu::gemm_xwt(*pool_, expanded.data(), shrunk.data(), b, DType::F32, n, N, R);
    for (int64_t i = 0; i < n; i++) {
      float* dst = o + tokens[size_t(i)] * N;
      const float* src = expanded.data() + i * N;
      for (int64_t j = 0; j < N; j++) dst[j] += src[j];
    }
  }
}

}  // namespace tandem
