// Mixture of experts: routing (softmax, top-k, optional renormalization) and the expert
// MLPs. Experts run one after the other over the tokens routed to them, and their
// weighted outputs are accumulated in a fixed order (expert id, then token), so the result
// does not depend on threads.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_gemm.h"

namespace tandem {

namespace {

// Softmax of one row of router logits in f32 (max subtracted first).
void softmax_row(float* probs, const float* logits, int64_t E) {
  const float m = *std::max_element(logits, logits + E);
  double sum = 0;
  for (int64_t e = 0; e < E; e++) {
    probs[e] = std::exp(logits[e] - m);
    sum += probs[e];
  }
  const float denom = float(sum);
  for (int64_t e = 0; e < E; e++) probs[e] /= denom;
}

// The k largest probabilities, largest first; ties go to the lower expert id.
void top_k(float* w, int32_t* ids, const float* probs, int64_t E, int k, std::vector<char>& taken) {
  std::fill(taken.begin(), taken.end(), 0);
  for (int j = 0; j < k; j++) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; e++)
      if (!taken[size_t(e)] && (best < 0 || probs[e] > probs[best])) best = e;
    taken[size_t(best)] = 1;
    w[j] = probs[best];
    ids[j] = int32_t(best);
  }
}

// One routed (token, weight) pair of an expert.
struct Route {
  int64_t token;
  float weight;
};

// Routes grouped by expert id; within an expert, in token order.
std::vector<std::vector<Route>> group_by_expert(const float* w, const int32_t* ids, int64_t T,
                                                int64_t k, int64_t E) {
  std::vector<std::vector<Route>> groups(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < k; j++) {
      const int32_t e = ids[t * k + j];
      TANDEM_CHECK(e >= 0 && e < E, "moe_experts: ids[{}, {}] = {} is outside [0, {})", t, j, e, E);
      groups[size_t(e)].push_back({t, w[t * k + j]});
    }
  return groups;
}

// Buffers reused across experts: xe [n, D], h [n, 2F], a [n, F], y [n, D].
struct ExpertScratch {
  std::vector<float> xe, h, a, y;
};

// dst [n, N] = src [n, K] · Wᵀ for one expert's projection [N, K].
using Project = std::function<void(float* dst, const float* src, int64_t n, const Linear& w)>;

// out[t] += w · down(act(gate x_t) * up x_t) for the expert's routes, in route order.
void accumulate_expert(float* out, const float* x, const std::vector<Route>& routes,
                       const Linear& gate_up, const Linear& down, Activation act,
                       const Project& project, ExpertScratch& s) {
  const int64_t n = int64_t(routes.size()), D = down.out_features(), F = down.in_features();
  s.xe.resize(size_t(n * D));
  s.h.resize(size_t(n * 2 * F));
  s.a.resize(size_t(n * F));
  s.y.resize(size_t(n * D));
  for (int64_t i = 0; i < n; i++)
    std::copy_n(x + routes[size_t(i)].token * D, D, s.xe.data() + i * D);
  project(s.h.data(), s.xe.data(), n, gate_up);
  cpu::gated_act_rows(s.a.data(), s.h.data(), n, F, act);
  project(s.y.data(), s.a.data(), n, down);
  for (int64_t i = 0; i < n; i++) {
    float* dst = out + routes[size_t(i)].token * D;
    const float w = routes[size_t(i)].weight;
    for (int64_t d = 0; d < D; d++) dst[d] += s.y[size_t(i * D + d)] * w;
  }
}

}  // namespace

//   weights [T, k] f32, ids [T, k] i32, logits [T, E]
void CpuBackend::topk_route(Tensor& weights, Tensor& ids, const Tensor& logits, int k,
                            bool renormalize) {
  cpu::check_tensor(weights, DType::F32, "topk_route", "weights");
  cpu::check_tensor(ids, DType::I32, "topk_route", "ids");
  cpu::check_tensor(logits, DType::F32, "topk_route", "logits");
  const int64_t T = logits.rows(), E = logits.cols();
  TANDEM_CHECK(k >= 1 && k <= E, "topk_route: k {} must be in [1, {}]", k, E);
  TANDEM_CHECK(weights.numel() == T * k && ids.numel() == T * k,
               "topk_route: weights {} and ids {} must be [{}, {}]", weights.shape.str(),
               ids.shape.str(), T, k);
  const float* lp = logits.ptr<float>();
  float* wp = weights.ptr<float>();
  int32_t* ip = ids.ptr<int32_t>();
  cpu::parallel_for(*pool_, T, 32 * E + int64_t(k) * E, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(static_cast<size_t>(E));
    std::vector<char> taken(static_cast<size_t>(E));
    for (int64_t t = begin; t < end; t++) {
      softmax_row(probs.data(), lp + t * E, E);
      float* w = wp + t * k;
      top_k(w, ip + t * k, probs.data(), E, k, taken);
      if (!renormalize) continue;
      float kept = 0;
      for (int j = 0; j < k; j++) kept += w[j];
      for (int j = 0; j < k; j++) w[j] /= kept;
    }
  });
}

// out[t] = Σ_j weights[t, j] · down_e(act(gate_e x) * up_e x), e = ids[t, j].
//   out, x [T, D], gate_up [E, 2F, D], down [E, D, F]: each f32, bf16, f16, a ggml block type
//   (cpu_block_gemm.h, under the backend's block arithmetic; D and F whole blocks), or FP8 with
//   its scales (an expert then runs the FP8 linear's W8A8 arithmetic: its rows' inputs
//   quantized per token, before gate|up and again before down)
void CpuBackend::moe_experts(Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                             const Linear& gate_up, const Linear& down, Activation act) {
  const char* op = "moe_experts";
  cpu::check_tensor(out, DType::F32, op, "out");
  cpu::check_tensor(x, DType::F32, op, "x");
  cpu::check_tensor(weights, DType::F32, op, "weights");
  cpu::check_tensor(ids, DType::I32, op, "ids");
  TANDEM_CHECK(bool(gate_up.quant) == bool(down.quant),
               "moe_experts: gate_up and down must both be FP8 or both not");
  if (!gate_up.quant) {
    cpu::check_matrix_weight(gate_up.weight, op, "gate_up");
    cpu::check_matrix_weight(down.weight, op, "down");
  }
  cpu::check_ndim(gate_up.weight, 3, op, "gate_up");
  cpu::check_ndim(down.weight, 3, op, "down");
  const Shape gu = gate_up.weight.shape, dn = down.weight.shape;
  const int64_t T = x.rows(), D = x.cols(), E = gu[0], F = gu[1] / 2;
  const int64_t k = T > 0 ? ids.numel() / T : 0;
  TANDEM_CHECK(F > 0 && D > 0 && gu[1] == 2 * F && gu[2] == D,
               "moe_experts: gate_up {} must be [E, 2F, {}]", gu.str(), D);
  TANDEM_CHECK(dn[0] == E && dn[1] == D && dn[2] == F, "moe_experts: down {} must be [{}, {}, {}]",
               dn.str(), E, D, F);
  TANDEM_CHECK(out.rows() == T && out.cols() == D && out.data != x.data,
               "moe_experts: out {} must be a separate [{}, {}] tensor", out.shape.str(), T, D);
  TANDEM_CHECK(ids.numel() == T * k && weights.numel() == T * k,
               "moe_experts: ids {} and weights {} must both be [{}, k]", ids.shape.str(),
               weights.shape.str(), T);
  const auto groups = group_by_expert(weights.ptr<float>(), ids.ptr<int32_t>(), T, k, E);
  float* o = out.ptr<float>();
  std::fill(o, o + T * D, 0.f);
  const Project project = [&](float* dst, const float* src, int64_t n, const Linear& w) {
    const int64_t N = w.out_features(), K = w.in_features();
    if (dtype_is_block(w.weight.dtype)) return block_product(dst, src, w.weight, n, N, K);
    if (!w.quant) return cpu::gemm_xwt(*pool_, dst, src, w.weight.data, w.weight.dtype, n, N, K);
    Tensor y = Tensor::borrow(dst, DType::F32, {n, N});
    linear_fp8(y, Tensor::borrow(const_cast<float*>(src), DType::F32, {n, K}), w);
  };
  ExpertScratch scratch;
  for (int64_t e = 0; e < E; e++) {
    if (groups[size_t(e)].empty()) continue;
    accumulate_expert(o, x.ptr<float>(), groups[size_t(e)], expert_linear(gate_up, e),
                      expert_linear(down, e), act, project, scratch);
  }
}

}  // namespace tandem
