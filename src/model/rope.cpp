#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/config.h"

namespace tandem {
namespace {

constexpr double kPi = 3.14159265358979323846;

// HF: 1 / base ** (arange(0, dim, 2) / dim), in float32.
std::vector<float> default_inv_freq(double base, int dim) {
  std::vector<float> f(size_t(dim / 2));
  for (int i = 0; i < dim / 2; i++) {
    float exponent = float(2 * i) / float(dim);
    f[size_t(i)] = float(1.0 / std::pow(double(float(base)), double(exponent)));
  }
  return f;
}

void apply_llama3(std::vector<float>& inv, const RopeConfig& r, int max_pos) {
  double factor = r.factor, low = r.low_freq_factor, high = r.high_freq_factor;
  double old_ctx = r.original_max_position_embeddings.value_or(max_pos);
  double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  for (float& f : inv) {
    double wavelen = 2 * kPi / f;
    if (wavelen > low_wavelen) {
      f = float(f / factor);
    } else if (wavelen >= high_wavelen) {  // medium band: interpolate
      double smooth = (old_ctx / wavelen - low) / (high - low);
      f = float((1 - smooth) * f / factor + smooth * f);
    }
  }
}

double yarn_mscale(double scale, double mscale = 1.0) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

void apply_yarn(RopeSpec& spec, const RopeConfig& r, int dim, int max_pos) {
  double base = r.theta, factor = r.factor;
  double orig = r.original_max_position_embeddings.value_or(max_pos);
  if (r.attention_factor) spec.attention_factor = float(*r.attention_factor);
  else if (r.mscale && r.mscale_all_dim && *r.mscale && *r.mscale_all_dim)
    spec.attention_factor = float(yarn_mscale(factor, *r.mscale) / yarn_mscale(factor, *r.mscale_all_dim));
  else spec.attention_factor = float(yarn_mscale(factor));
  double beta_fast = r.beta_fast.value_or(32), beta_slow = r.beta_slow.value_or(1);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2 * kPi)) / (2 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < dim / 2; i++) {
    float pos_freq = float(std::pow(double(float(base)), double(float(2 * i) / float(dim))));
    float extrapolation = 1.0f / pos_freq;
    float interpolation = 1.0f / (float(factor) * pos_freq);
    float ramp = std::clamp(float((i - low) / (high - low)), 0.0f, 1.0f);
    float extrapolation_factor = 1.0f - ramp;
    spec.inv_freq[size_t(i)] =
        interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
}

// Gemma 4's "proportional" RoPE (HF _compute_proportional_rope_parameters): the first
// int(partial_rotary_factor · head_dim / 2) frequencies are θ^(−2i / head_dim) (the exponent's
// denominator is the whole head_dim, not the rotated part), the rest are 0, so their pairs
// (i, i + head_dim/2) do not turn. The table spans the whole head: rotary_dim = head_dim.
RopeSpec make_proportional_rope(const RopeConfig& r, int head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    fail("rope: proportional RoPE needs an even head_dim (got {})", head_dim);
  if (!(r.partial_rotary_factor >= 0 && r.partial_rotary_factor <= 1))
    fail("rope: partial_rotary_factor {} must be in [0, 1]", r.partial_rotary_factor);
  RopeSpec spec;
  spec.base = float(r.theta);
  spec.rotary_dim = head_dim;
  // Python: int(rope_proportion * head_dim // 2), a float floor division.
  int rope_angles = int(std::floor(r.partial_rotary_factor * head_dim / 2));
  spec.inv_freq.assign(size_t(head_dim / 2), 0.f);
  for (int i = 0; i < rope_angles; i++) {
    float exponent = float(2 * i) / float(head_dim);
    spec.inv_freq[size_t(i)] = float(1.0 / std::pow(double(float(r.theta)), double(exponent)));
  }
  for (float& f : spec.inv_freq) f = float(f / float(r.factor));
  return spec;
}

void apply_freq_divisors(std::vector<float>& inv, const std::vector<float>& divisors) {
  if (divisors.empty()) return;
  if (divisors.size() != inv.size())
    fail("rope: {} frequency divisors (GGUF rope_freqs) for {} rotary pairs", divisors.size(),
         inv.size());
  for (size_t i = 0; i < inv.size(); i++) {
    if (!(divisors[i] > 0) || !std::isfinite(divisors[i]))
      fail("rope: frequency divisor {} (GGUF rope_freqs[{}]) is not a positive number", divisors[i], i);
    inv[i] = float(inv[i] / divisors[i]);
  }
}

}  // namespace

RopeSpec make_rope(const RopeConfig& r, int head_dim, int max_pos) {
  if (r.type == "proportional") return make_proportional_rope(r, head_dim);
  RopeSpec spec;
  spec.base = float(r.theta);
  int dim = int(head_dim * r.partial_rotary_factor);
  dim -= dim % 2;
  if (dim <= 0 || dim > head_dim)
    fail("rope: rotary dim {} (head_dim {} × partial_rotary_factor {}) is invalid", dim, head_dim,
         r.partial_rotary_factor);
  spec.rotary_dim = dim;
  spec.inv_freq = default_inv_freq(r.theta, dim);
  if (r.type == "default") {
  } else if (r.type == "linear") {
    for (float& f : spec.inv_freq) f = float(f / r.factor);
  } else if (r.type == "dynamic") {
    spec.dynamic_factor = float(r.factor);
    // HF scales against config.max_position_embeddings (the cache's initial length).
    spec.original_max_position = max_pos;
  } else if (r.type == "llama3") {
    apply_llama3(spec.inv_freq, r, max_pos);
  } else if (r.type == "yarn") {
    apply_yarn(spec, r, dim, max_pos);
  } else {
    fail("rope: rope_type '{}' is not supported yet", r.type);
  }
  apply_freq_divisors(spec.inv_freq, r.freq_divisors);
  return spec;
}

}  // namespace tandem
