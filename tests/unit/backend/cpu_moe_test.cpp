// topk_route and moe_experts against naive per-token loops in double, plus hand-made ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tandem {
namespace cpu_moe_test {

using test::device_f32;
using test::device_i32;
using test::kTol;
using test::rel_err;
using test::to_vec;

struct Routing {
  std::vector<float> weights;  // [T, k]
  std::vector<int32_t> ids;    // [T, k]
};

Routing route(Backend& be, const std::vector<float>& logits, int T, int E, int k, bool renorm) {
  Tensor w = be.alloc(DType::F32, {T, k}), ids = be.alloc(DType::I32, {T, k});
  be.topk_route(w, ids, device_f32(be, logits, {T, E}), k, renorm);
  Routing r{to_vec(be, w), {}};
  r.ids.assign(ids.ptr<int32_t>(), ids.ptr<int32_t>() + T * k);
  return r;
}

TEST(CpuTopkRoute, MatchesNaiveSoftmaxTopK) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [T, E, k] : {std::tuple{1, 4, 1}, {9, 8, 2}, {5, 16, 4}, {3, 6, 6}}) {
      const auto logits = test::random_vec(rng, size_t(T * E), -4.f, 4.f);
      for (bool renorm : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "T=" << T << " E=" << E << " k=" << k << " renorm=" << renorm);
        const Routing got = route(*be, logits, T, E, k, renorm);
        std::vector<double> ref_w;
        for (int t = 0; t < T; t++) {
          std::vector<double> p(static_cast<size_t>(E));
          const double m = *std::max_element(logits.begin() + t * E, logits.begin() + (t + 1) * E);
          double sum = 0;
          for (int e = 0; e < E; e++)
            sum += (p[size_t(e)] = std::exp(logits[size_t(t * E + e)] - m));
          std::vector<int> order(static_cast<size_t>(E));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
          double kept = 0;
          for (int j = 0; j < k; j++) kept += p[size_t(order[size_t(j)])] / sum;
          for (int j = 0; j < k; j++) {
            EXPECT_EQ(got.ids[size_t(t * k + j)], order[size_t(j)]);
            ref_w.push_back(p[size_t(order[size_t(j)])] / sum / (renorm ? kept : 1.0));
          }
        }
        EXPECT_LE(rel_err(got.weights, ref_w), kTol);
      }
    }
  }
}

TEST(CpuTopkRoute, TiesGoToTheLowerExpertId) {
  auto be = make_cpu_backend();
  const Routing a = route(*be, {1.f, 3.f, 3.f, 0.f}, 1, 4, 2, false);
  EXPECT_EQ(a.ids, (std::vector<int32_t>{1, 2}));
  const Routing b = route(*be, {0.5f, 0.5f, 0.5f, 0.5f}, 1, 4, 2, false);
  EXPECT_EQ(b.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(b.weights[0], 0.25f);
  const Routing c = route(*be, {0.5f, 0.5f, 0.5f, 0.5f}, 1, 4, 2, true);
  EXPECT_FLOAT_EQ(c.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(c.weights[1], 0.5f);
  Tensor w = be->alloc(DType::F32, {1, 5}), ids = be->alloc(DType::I32, {1, 5});
  EXPECT_THROW(be->topk_route(w, ids, device_f32(*be, {1, 2, 3, 4}, {1, 4}), 5, true), Error);
}

double act_ref(double x, Activation act) {
  if (act == Activation::SiLU) return x / (1 + std::exp(-x));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// out[t] = Σ_j w[t, j] · down_e(act(gate_e x) * up_e x), one token at a time.
std::vector<double> moe_ref(const std::vector<float>& x, const Routing& r,
                            const std::vector<float>& gate_up, const std::vector<float>& down,
                            int T, int D, int F, int k, Activation act) {
  std::vector<double> out(size_t(T * D), 0.0);
  for (int t = 0; t < T; t++)
    for (int j = 0; j < k; j++) {
      const int e = r.ids[size_t(t * k + j)];
      std::vector<double> hidden(static_cast<size_t>(F));
      for (int f = 0; f < F; f++) {
        double g = 0, u = 0;
        for (int d = 0; d < D; d++) {
          g += double(gate_up[size_t((e * 2 * F + f) * D + d)]) * x[size_t(t * D + d)];
          u += double(gate_up[size_t((e * 2 * F + F + f) * D + d)]) * x[size_t(t * D + d)];
        }
        hidden[size_t(f)] = act_ref(g, act) * u;
      }
      for (int d = 0; d < D; d++) {
        double y = 0;
        for (int f = 0; f < F; f++)
          y += double(down[size_t((e * D + d) * F + f)]) * hidden[size_t(f)];
        out[size_t(t * D + d)] += r.weights[size_t(t * k + j)] * y;
      }
    }
  return out;
}

TEST(CpuMoeExperts, MatchesNaivePerTokenLoop) {
  auto be = make_cpu_backend();
  const int E = 6, D = 32, F = 24;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    const auto gate_up = test::random_vec(rng, size_t(E * 2 * F * D), -0.5f, 0.5f);
    const auto down = test::random_vec(rng, size_t(E * D * F), -0.5f, 0.5f);
    Tensor gu_d = device_f32(*be, gate_up, {E, 2 * F, D}),
           down_d = device_f32(*be, down, {E, D, F});
    for (auto [T, k] : {std::pair{1, 2}, {9, 2}, {4, 1}, {17, 3}}) {
      for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
        SCOPED_TRACE(testing::Message() << "T=" << T << " k=" << k << " act=" << int(act));
        const auto x = test::random_vec(rng, size_t(T * D));
        // Route with the backend itself, over logits that leave expert 5 unused.
        auto logits = test::random_vec(rng, size_t(T * E), -3.f, 3.f);
        for (int t = 0; t < T; t++) logits[size_t(t * E + 5)] = -100.f;
        const Routing r = route(*be, logits, T, E, k, true);
        Tensor out = be->alloc(DType::F32, {T, D});
        be->moe_experts(out, device_f32(*be, x, {T, D}), device_f32(*be, r.weights, {T, k}),
                        device_i32(*be, r.ids, {T, k}), {.weight = gu_d}, {.weight = down_d}, act);
        EXPECT_LE(rel_err(to_vec(*be, out), moe_ref(x, r, gate_up, down, T, D, F, k, act)), kTol);
      }
    }
  }
}

// FP8 experts: every expert's two projections in the declared W8A8 arithmetic (as in
// cpu_linear_fp8_test.cpp), written out in double per token — its input scaled per token
// (per block_k columns for block weights) or by the expert's static scale, rounded to
// e4m3, multiplied by the e4m3 weight and both scales — with act(g) · u held in f32
// between the two, as the backend holds it.
struct Fp8Expert {
  ScaleGranularity granularity;
  int block_n = 0, block_k = 0;
  bool static_input = false;
};

struct Fp8Stack {
  std::vector<uint8_t> w;         // [E, N, K]
  std::vector<float> scale;       // [E, per expert]
  std::vector<float> input_scale; // [E] (static only)
  int64_t per_expert = 0;         // scales per expert
};

Fp8Stack random_fp8_stack(std::mt19937& rng, const Fp8Expert& c, int64_t E, int64_t N, int64_t K) {
  Fp8Stack st;
  std::uniform_real_distribution<float> v(-400.f, 400.f), sv(2e-4f, 6e-4f), iv(0.01f, 0.03f);
  st.w.resize(size_t(E * N * K));
  for (auto& b : st.w) b = f32_to_f8e4m3(v(rng));
  st.per_expert = c.granularity == ScaleGranularity::PerTensor    ? 1
                  : c.granularity == ScaleGranularity::PerChannel ? N
                                                                  : ((N + c.block_n - 1) / c.block_n) *
                                                                        ((K + c.block_k - 1) / c.block_k);
  st.scale.resize(size_t(E * st.per_expert));
  for (float& f : st.scale) f = sv(rng);
  if (c.static_input) {
    st.input_scale.resize(size_t(E));
    for (float& f : st.input_scale) f = iv(rng);
  }
  return st;
}

// Stacked as linear.h describes: weight [E, N, K], weight_scale [E, 1] / [E, N] /
// [E, NB, KB], input_scale [E, 1].
Linear upload_stack(Backend& be, const Fp8Stack& st, const Fp8Expert& c, int64_t E, int64_t N,
                    int64_t K) {
  Tensor wh = Tensor::empty_host(DType::F8E4M3, {E, N, K});
  std::copy(st.w.begin(), st.w.end(), wh.ptr<uint8_t>());
  LinearQuant q{.granularity = c.granularity, .block_n = c.block_n, .block_k = c.block_k};
  Shape scale_shape = c.granularity == ScaleGranularity::PerTensor    ? Shape{E, 1}
                      : c.granularity == ScaleGranularity::PerChannel ? Shape{E, N}
                                                                      : Shape{E, (N + c.block_n - 1) / c.block_n,
                                                                              (K + c.block_k - 1) / c.block_k};
  q.weight_scale = device_f32(be, st.scale, scale_shape);
  q.input = c.static_input ? InputScaling::Static : InputScaling::Dynamic;
  if (c.static_input) q.input_scale = device_f32(be, st.input_scale, {E, 1});
  return Linear{.weight = be.upload(wh, DType::F8E4M3), .quant = q};
}

// y = expert e's projection of one row x [K] → [N], in double.
std::vector<double> fp8_project(const std::vector<float>& x, const Fp8Stack& st, const Fp8Expert& c,
                                int64_t e, int64_t N, int64_t K) {
  const bool block = c.granularity == ScaleGranularity::Block;
  const int64_t group = block ? c.block_k : K, KB = (K + group - 1) / group;
  const uint8_t* w = st.w.data() + e * N * K;
  const float* s = st.scale.data() + e * st.per_expert;
  std::vector<double> y(size_t(N), 0.0);
  for (int64_t g = 0; g < KB; g++) {
    const int64_t k0 = g * group, k1 = std::min(K, k0 + group);
    double amax = 0;
    for (int64_t k = k0; k < k1; k++) amax = std::max(amax, std::fabs(double(x[size_t(k)])));
    const double sx = c.static_input ? st.input_scale[size_t(e)] : std::max(amax, 1e-12) / 448.0;
    for (int64_t n = 0; n < N; n++) {
      double sum = 0;
      for (int64_t k = k0; k < k1; k++)
        sum += double(f8e4m3_to_f32(f32_to_f8e4m3(float(x[size_t(k)] / sx)))) * f8e4m3_to_f32(w[n * K + k]);
      const double sw = c.granularity == ScaleGranularity::PerTensor    ? s[0]
                        : c.granularity == ScaleGranularity::PerChannel ? s[n]
                                                                        : s[(n / c.block_n) * KB + g];
      y[size_t(n)] += sum * sx * sw;
    }
  }
  return y;
}

TEST(CpuMoeExperts, Fp8ExpertsComputeTheDeclaredScheme) {
  auto be = make_cpu_backend();
  std::mt19937 rng(23);
  const int64_t E = 5, D = 64, F = 40, T = 11, k = 2;
  const Fp8Expert cases[] = {{ScaleGranularity::PerTensor, 0, 0, true},
                             {ScaleGranularity::PerTensor, 0, 0, false},
                             {ScaleGranularity::PerChannel, 0, 0, false},
                             {ScaleGranularity::Block, 16, 32, false},
                             {ScaleGranularity::Block, 1, 128, false}};
  for (const Fp8Expert& c : cases) {
    SCOPED_TRACE(testing::Message() << "granularity " << int(c.granularity) << " block "
                                    << c.block_n << "x" << c.block_k << " static " << c.static_input);
    const Fp8Stack gu = random_fp8_stack(rng, c, E, 2 * F, D), dn = random_fp8_stack(rng, c, E, D, F);
    const auto x = test::random_vec(rng, size_t(T * D), -2.f, 2.f);
    auto logits = test::random_vec(rng, size_t(T * E), -3.f, 3.f);
    for (int64_t t = 0; t < T; t++) logits[size_t(t * E + 3)] = -100.f;  // expert 3 idle
    const Routing r = route(*be, logits, int(T), int(E), int(k), true);
    std::vector<double> ref(size_t(T * D), 0.0);
    for (int64_t t = 0; t < T; t++)
      for (int64_t j = 0; j < k; j++) {
        const int64_t e = r.ids[size_t(t * k + j)];
        const std::vector<float> xt(x.begin() + t * D, x.begin() + (t + 1) * D);
        const std::vector<double> h = fp8_project(xt, gu, c, e, 2 * F, D);
        std::vector<float> a(static_cast<size_t>(F));
        for (int64_t f = 0; f < F; f++) a[size_t(f)] = float(act_ref(h[size_t(f)], Activation::SiLU) * h[size_t(F + f)]);
        const std::vector<double> y = fp8_project(a, dn, c, e, D, F);
        for (int64_t d = 0; d < D; d++) ref[size_t(t * D + d)] += r.weights[size_t(t * k + j)] * y[size_t(d)];
      }
    Tensor out = be->alloc(DType::F32, {T, D});
    be->moe_experts(out, device_f32(*be, x, {T, D}), device_f32(*be, r.weights, {T, k}),
                    device_i32(*be, r.ids, {T, k}), upload_stack(*be, gu, c, E, 2 * F, D),
                    upload_stack(*be, dn, c, E, D, F), Activation::SiLU);
    // f32 sums against double ones; an e4m3 rounding of act(g)·u may rarely land on the
    // other side of a tie, which moves its term by one e4m3 step.
    EXPECT_LE(rel_err(to_vec(*be, out), ref), 1e-4);
  }
}

TEST(CpuMoeExperts, RejectsBadIdsAndShapes) {
  auto be = make_cpu_backend();
  const int E = 2, D = 8, F = 4;
  Linear gu{.weight = be->zeros(DType::F32, {E, 2 * F, D})};
  Linear down{.weight = be->zeros(DType::F32, {E, D, F})};
  Tensor x = be->zeros(DType::F32, {1, D}), out = be->alloc(DType::F32, {1, D});
  Tensor w = device_f32(*be, {1.f}, {1, 1});
  EXPECT_THROW(be->moe_experts(out, x, w, device_i32(*be, {2}, {1, 1}), gu, down, Activation::SiLU),
               Error);
  Linear bad_down{.weight = be->zeros(DType::F32, {E, F, D})};
  EXPECT_THROW(
      be->moe_experts(out, x, w, device_i32(*be, {0}, {1, 1}), gu, bad_down, Activation::SiLU),
      Error);
}

}  // namespace cpu_moe_test
}  // namespace tandem
