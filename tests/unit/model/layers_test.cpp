// The shared model layers (model/layers.h) on the CPU backend against hand-written loops:
// the LM head's order of operations and its f32 output, and MoE routing on f32 scores.
// (The layers as whole models are checked against transformers in tests/golden/.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "model/layers.h"

namespace tandem {
namespace layers_test {

Tensor put(Backend& be, const std::vector<float>& v, Shape shape) {
  Tensor host = Tensor::empty_host(DType::F32, shape);
  std::copy(v.begin(), v.end(), host.ptr<float>());
  return be.upload(host, be.act_dtype());
}

std::vector<float> random_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// logits = softcap · tanh((rms_norm(h) · (w + offset) / divisor) · Wᵀ / softcap)
TEST(Layers, LmHeadNormsDividesProjectsAndCapsInF32) {
  auto be = make_cpu_backend();
  std::mt19937 rng(7);
  const int64_t S = 3, D = 8, V = 11;
  auto h = random_vec(rng, size_t(S * D)), w = random_vec(rng, size_t(D));
  auto head = random_vec(rng, size_t(V * D));
  LmHead lm{.final_norm = {put(*be, w, {D}), 1e-5f, 1.f},
            .head = {.weight = put(*be, head, {V, D})},
            .logit_divisor = 2.f,
            .softcap = 3.f};
  Tensor logits = lm_head_logits(*be, put(*be, h, {S, D}), lm);
  ASSERT_EQ(logits.dtype, DType::F32);
  ASSERT_TRUE((logits.shape == Shape{S, V}));
  Tensor got = be->to_host_f32(logits);
  for (int64_t s = 0; s < S; s++) {
    double ms = 0;
    for (int64_t d = 0; d < D; d++) ms += double(h[size_t(s * D + d)]) * h[size_t(s * D + d)];
    const double r = 1.0 / std::sqrt(ms / double(D) + 1e-5);
    for (int64_t v = 0; v < V; v++) {
      double dot = 0;
      for (int64_t d = 0; d < D; d++)
        dot += h[size_t(s * D + d)] * r * (w[size_t(d)] + 1.0) / 2.0 * head[size_t(v * D + d)];
      EXPECT_NEAR(got.ptr<float>()[s * V + v], 3.0 * std::tanh(dot / 3.0), 1e-5)
          << "row " << s << " logit " << v;
    }
  }
}

// With a buffer (StepTensors::logits_out: DecodeGraphs' one buffer for every bucket) the
// logits are written into its rows, equal to those of a forward that allocates them; a
// buffer of another shape or dtype is refused.
TEST(Layers, LmHeadWritesIntoTheGivenBuffer) {
  auto be = make_cpu_backend();
  std::mt19937 rng(9);
  const int64_t S = 2, D = 8, V = 5;
  auto h = random_vec(rng, size_t(S * D));
  LmHead lm{.final_norm = {put(*be, random_vec(rng, size_t(D)), {D}), 1e-5f, 0.f},
            .head = {.weight = put(*be, random_vec(rng, size_t(V * D)), {V, D})},
            .softcap = 2.f};
  const Tensor x = put(*be, h, {S, D});
  Tensor filled = Tensor::empty_host(DType::F32, {S + 2, V});  // a larger bucket's buffer
  std::fill_n(filled.ptr<float>(), (S + 2) * V, -7.f);
  Tensor buffer = be->upload(filled, DType::F32);
  Tensor rows = buffer.slice_rows(0, S);
  Tensor got = lm_head_logits(*be, x, lm, rows);
  EXPECT_EQ(got.data, rows.data);
  Tensor want = be->to_host_f32(lm_head_logits(*be, x, lm));
  Tensor all = be->to_host_f32(buffer);
  for (int64_t i = 0; i < S * V; i++) EXPECT_EQ(all.ptr<float>()[i], want.ptr<float>()[i]) << i;
  for (int64_t i = S * V; i < (S + 2) * V; i++) EXPECT_EQ(all.ptr<float>()[i], -7.f) << i;
  EXPECT_THROW(lm_head_logits(*be, x, lm, buffer), Error);  // S + 2 rows for S
  EXPECT_THROW(lm_head_logits(*be, x, lm, be->alloc(DType::BF16, {S, V})), Error);
}

// Each token goes to its top expert only (k = 1, renormalized weight 1): the output is
// that expert's gated MLP, whichever expert the f32 router scores pick.
TEST(Layers, MoeRunsTheExpertTheRouterPicks) {
  auto be = make_cpu_backend();
  std::mt19937 rng(11);
  const int64_t T = 4, D = 8, F = 6, E = 3;
  auto x = random_vec(rng, size_t(T * D));
  auto gate_up = random_vec(rng, size_t(E * 2 * F * D)), down = random_vec(rng, size_t(E * D * F));
  // Router rows: expert e scores x[:, e] · 10, so a token's expert is argmax_e x[t, e].
  std::vector<float> router(size_t(E * D), 0.f);
  for (int64_t e = 0; e < E; e++) router[size_t(e * D + e)] = 10.f;
  MoeBlock m{.router = {.weight = put(*be, router, {E, D})},
             .experts_gate_up = {.weight = put(*be, gate_up, {E, 2 * F, D})},
             .experts_down = {.weight = put(*be, down, {E, D, F})},
             .top_k = 1};
  Tensor xd = put(*be, x, {T, D});
  Tensor got = be->to_host_f32(moe(*be, xd, xd, m));
  for (int64_t t = 0; t < T; t++) {
    int64_t e = 0;
    for (int64_t j = 1; j < E; j++)
      if (x[size_t(t * D + j)] > x[size_t(t * D + e)]) e = j;
    std::vector<double> act(static_cast<size_t>(F));
    for (int64_t f = 0; f < F; f++) {
      double g = 0, u = 0;
      for (int64_t d = 0; d < D; d++) {
        g += gate_up[size_t((e * 2 * F + f) * D + d)] * x[size_t(t * D + d)];
        u += gate_up[size_t((e * 2 * F + F + f) * D + d)] * x[size_t(t * D + d)];
      }
      act[size_t(f)] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int64_t d = 0; d < D; d++) {
      double o = 0;
      for (int64_t f = 0; f < F; f++) o += down[size_t((e * D + d) * F + f)] * act[size_t(f)];
      EXPECT_NEAR(got.ptr<float>()[t * D + d], o, 1e-4) << "token " << t << " expert " << e;
    }
  }
}

}  // namespace layers_test
}  // namespace tandem
