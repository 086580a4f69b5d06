// topk_route and moe_experts against naive per-token loops in double, plus hand-made ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace {

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
                        device_i32(*be, r.ids, {T, k}), gu_d, down_d, act);
        EXPECT_LE(rel_err(to_vec(*be, out), moe_ref(x, r, gate_up, down, T, D, F, k, act)), kTol);
      }
    }
  }
}

TEST(CpuMoeExperts, RejectsBadIdsAndShapes) {
  auto be = make_cpu_backend();
  const int E = 2, D = 8, F = 4;
  Tensor gu = be->zeros(DType::F32, {E, 2 * F, D}), down = be->zeros(DType::F32, {E, D, F});
  Tensor x = be->zeros(DType::F32, {1, D}), out = be->alloc(DType::F32, {1, D});
  Tensor w = device_f32(*be, {1.f}, {1, 1});
  EXPECT_THROW(be->moe_experts(out, x, w, device_i32(*be, {2}, {1, 1}), gu, down, Activation::SiLU),
               Error);
  Tensor bad_down = be->zeros(DType::F32, {E, F, D});
  EXPECT_THROW(
      be->moe_experts(out, x, w, device_i32(*be, {0}, {1, 1}), gu, bad_down, Activation::SiLU),
      Error);
}

}  // namespace
}  // namespace tandem
