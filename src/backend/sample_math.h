// The per-token formulas of the sampling function (sampling.h), shared verbatim by the CPU
// twin (cpu/cpu_sample.cpp) and the CUDA kernels (cuda/cuda_sample.cu) so both compute the
// same bits. Rules that keep them identical: double arithmetic where rounding matters;
// every product that feeds an addition is exact (so a fused multiply-add, which either
// compiler may emit, rounds the same); integers for anything summed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/philox.h"

namespace tandem {

// Top-p masses are q_i = floor(p_i · 2^40): p_i <= 1 and V <= 2^24 keep sums below 2^64.
constexpr double kSampleMassScale = 1099511627776.0;  // 2^40

// Repetition then presence/frequency: l / r if l > 0 else l · r, minus `offset`
// (SampleRow::penalty_offset). l · r is exact in double, so fused or not it rounds once.
TANDEM_HOST_DEVICE inline float penalized_logit(float l, float repetition, float offset) {
  double x = l;
  if (repetition != 1.f) x = l > 0.f ? x / double(repetition) : x * double(repetition);
  return float(x - double(offset));
}

// A key whose ascending order is the sample order (descending logit; ties are broken by
// id outside the key). -0 and +0 get one key; NaN sorts last.
TANDEM_HOST_DEVICE inline uint32_t sample_order_key(float l) {
  if (l != l) return 0xFFFFFFFFu;
  if (l == 0.f) l = 0.f;  // -0 -> +0
#if defined(__CUDA_ARCH__)
  uint32_t bits = __float_as_uint(l);
#else
  uint32_t bits;
  std::memcpy(&bits, &l, sizeof(bits));
#endif
  uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

// The sample-order position of (l, id) as one integer: smaller = earlier.
TANDEM_HOST_DEVICE inline uint64_t sample_order_rank(float l, int32_t id) {
  return uint64_t(sample_order_key(l)) << 32 | uint32_t(id);
}

// s = (l - l_max) / T: the log of p / p_max under temperature T.
TANDEM_HOST_DEVICE inline double scaled_logit(float l, float l_max, float temperature) {
  return (double(l) - double(l_max)) / double(temperature);
}

// q = floor(exp(s) · 2^40); 0 for s = -inf or NaN.
TANDEM_HOST_DEVICE inline uint64_t sample_mass(double s) {
  double p = exp(s);
  return p > 0.0 ? uint64_t(p * kSampleMassScale) : 0u;
}

// The mass the top-p prefix must reach: ceil(top_p · total), in [1, total].
TANDEM_HOST_DEVICE inline uint64_t top_p_target(float top_p, uint64_t total) {
  double t = ceil(double(top_p) * double(total));
  uint64_t target = t >= double(total) ? total : uint64_t(t);
  return target < 1u ? uint64_t(1) : target;
}

// min-p: p >= min_p (the first token of the order is kept regardless).
TANDEM_HOST_DEVICE inline bool passes_min_p(double s, float min_p) {
  return min_p <= 0.f || exp(s) >= double(min_p);
}

// The Gumbel-max score of token `id`: s - log(-log(u)), u from the row's Philox stream.
TANDEM_HOST_DEVICE inline double gumbel_score(double s, uint64_t seed, uint64_t counter,
                                              int32_t id) {
  double u = philox_uniform(seed, counter, uint64_t(uint32_t(id)));
  return s - log(-log(u));
}

}  // namespace tandem
