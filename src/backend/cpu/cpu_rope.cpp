// Rotary position embeddings, HF "rotate_half" layout: dims i and i + rotary_dim/2 of each
// head form a pair rotated by angle position * inv_freq[i]; dims >= rotary_dim pass through.
// Angles follow HF exactly: f32 product of f32 position and f32 inv_freq, then cos/sin in f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

namespace {

void check_rope_spec(const RopeSpec& spec, int64_t head_dim) {
  TANDEM_CHECK(spec.rotary_dim > 0 && spec.rotary_dim % 2 == 0 && spec.rotary_dim <= head_dim,
               "rope: rotary_dim {} must be even and in (0, head_dim {}]", spec.rotary_dim,
               head_dim);
  TANDEM_CHECK(int(spec.inv_freq.size()) == spec.rotary_dim / 2,
               "rope: inv_freq has {} entries, rotary_dim {} needs {}", spec.inv_freq.size(),
               spec.rotary_dim, spec.rotary_dim / 2);
  if (spec.dynamic_factor > 0.f)
    TANDEM_CHECK(spec.original_max_position > 0 && spec.rotary_dim > 2,
                 "rope: dynamic NTK needs original_max_position > 0 (got {}) and rotary_dim > 2 "
                 "(got {})",
                 spec.original_max_position, spec.rotary_dim);
}

// HF dynamic NTK inv_freq for a sequence of length L (> original_max_position), in f32 as
// HF computes it from its int64 seq_len tensor.
std::vector<float> dynamic_inv_freq(const RopeSpec& spec, int64_t L) {
  const int dim = spec.rotary_dim;
  const float factor = spec.dynamic_factor;
  const float ratio = factor * float(L) / float(spec.original_max_position) - (factor - 1.f);
  const float base = spec.base * std::pow(ratio, float(double(dim) / double(dim - 2)));
  std::vector<float> inv(size_t(dim / 2));
  for (int i = 0; i < dim / 2; i++)
    inv[size_t(i)] = 1.f / std::pow(base, float(2 * i) / float(dim));
  return inv;
}

// Per token, the inv_freq table it rotates with: the spec's, or (dynamic NTK) its row's
// own when the row's longest position in this step exceeds the original context.
// `storage` owns the per-row tables the returned pointers point into.
std::vector<const float*> token_inv_freq(const StepTensors& step, const RopeSpec& spec,
                                         std::vector<std::vector<float>>& storage) {
  const int T = step.num_tokens;
  std::vector<const float*> table(size_t(T), spec.inv_freq.data());
  if (spec.dynamic_factor <= 0.f) return table;
  cpu::check_step(step, "rope");
  const int32_t* starts = step.seq_starts.ptr<int32_t>();
  const int32_t* pos = step.positions.ptr<int32_t>();
  storage.reserve(size_t(step.num_rows));
  for (int b = 0; b < step.num_rows; b++) {
    if (starts[b] == starts[b + 1]) continue;
    const int32_t max_pos = *std::max_element(pos + starts[b], pos + starts[b + 1]);
    const int64_t L = int64_t(max_pos) + 1;
    if (L <= spec.original_max_position) continue;
    storage.push_back(dynamic_inv_freq(spec, L));
    for (int t = starts[b]; t < starts[b + 1]; t++) table[size_t(t)] = storage.back().data();
  }
  return table;
}

// Rotates the H heads of one token; cs = [cos (half) | sin (half)], already scaled.
void rotate_token(float* x, const float* cs, int64_t H, int64_t Dh, int half) {
  const float* c = cs;
  const float* s = cs + half;
  for (int64_t h = 0; h < H; h++) {
    float* head = x + h * Dh;
    for (int i = 0; i < half; i++) {
      const float x1 = head[i], x2 = head[i + half];
      head[i] = x1 * c[i] - x2 * s[i];
      head[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
}

}  // namespace

// Rotates each head in place.   x [T, H, Dh], step.positions [T] i32
void CpuBackend::rope(Tensor& x, const StepTensors& step, const RopeSpec& spec) {
  cpu::check_tensor(x, DType::F32, "rope", "x");
  cpu::check_ndim(x, 3, "rope", "x");
  cpu::check_tensor(step.positions, DType::I32, "rope", "step.positions");
  const int64_t T = x.dim(0), H = x.dim(1), Dh = x.dim(2);
  TANDEM_CHECK(T == step.num_tokens && step.positions.numel() >= T,
               "rope: x {} vs step with {} tokens, positions {}", x.shape.str(), step.num_tokens,
               step.positions.shape.str());
  check_rope_spec(spec, Dh);
  std::vector<std::vector<float>> storage;
  const std::vector<const float*> freq = token_inv_freq(step, spec, storage);
  const int32_t* pos = step.positions.ptr<int32_t>();
  const int half = spec.rotary_dim / 2;
  float* xp = x.ptr<float>();
  cpu::parallel_for(*pool_, T, H * Dh + 32 * half, [&](int64_t begin, int64_t end) {
    std::vector<float> cs(size_t(2 * half));
    for (int64_t t = begin; t < end; t++) {
      const float p = float(pos[t]);
      for (int i = 0; i < half; i++) {
        const float angle = p * freq[size_t(t)][i];
        cs[size_t(i)] = std::cos(angle) * spec.attention_factor;
        cs[size_t(half + i)] = std::sin(angle) * spec.attention_factor;
      }
      rotate_token(xp + t * H * Dh, cs.data(), H, Dh, half);
    }
  });
}

}  // namespace tandem
