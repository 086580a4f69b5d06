// Mixture of experts: routing (softmax, top-k, optional renormalization) and the expert
// MLPs. Experts run one after the other over the tokens routed to them, and their
// weighted outputs are accumulated in a fixed order (expert id, then token), so the result
// does not depend on threads.
#include <algorithm>
#include <cmath>
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

// One expert's weights, each of its own dtype.   gate_up [2F, D], down [D, F]
struct ExpertWeights {
  const void* gate_up;
  const void* down;
  DType gate_up_dtype, down_dtype;
  int64_t D, F;
};

// Buffers reused across experts: xe [n, D], h [n, 2F], a [n, F], y [n, D].
struct ExpertScratch {
  std::vector<float> xe, h, a, y;
};

// out[t] += w · down(act(gate x_t) * up x_t) for the expert's routes, in route order.
void accumulate_expert(ThreadPool& pool, float* out, const float* x,
                       const std::vector<Route>& routes, const ExpertWeights& ew, Activation act,
                       ExpertScratch& s) {
  const int64_t n = int64_t(routes.size()), D = ew.D, F = ew.F;
  s.xe.resize(size_t(n * D));
  s.h.resize(size_t(n * 2 * F));
  s.a.resize(size_t(n * F));
  s.y.resize(size_t(n * D));
  for (int64_t i = 0; i < n; i++)
    std::copy_n(x + routes[size_t(i)].token * D, D, s.xe.data() + i * D);
  cpu::gemm_xwt(pool, s.h.data(), s.xe.data(), ew.gate_up, ew.gate_up_dtype, n, 2 * F, D);
  cpu::gated_act_rows(s.a.data(), s.h.data(), n, F, act);
  cpu::gemm_xwt(pool, s.y.data(), s.a.data(), ew.down, ew.down_dtype, n, D, F);
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
//   out, x [T, D], gate_up [E, 2F, D], down [E, D, F] (each f32, bf16 or f16)
void CpuBackend::moe_experts(Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                             const Tensor& gate_up, const Tensor& down, Activation act) {
  const char* op = "moe_experts";
  cpu::check_tensor(out, DType::F32, op, "out");
  cpu::check_tensor(x, DType::F32, op, "x");
  cpu::check_tensor(weights, DType::F32, op, "weights");
  cpu::check_tensor(ids, DType::I32, op, "ids");
  const DType gate_up_dtype = cpu::check_weight(gate_up, op, "gate_up");
  const DType down_dtype = cpu::check_weight(down, op, "down");
  cpu::check_ndim(gate_up, 3, op, "gate_up");
  cpu::check_ndim(down, 3, op, "down");
  const int64_t T = x.rows(), D = x.cols(), E = gate_up.dim(0), F = gate_up.dim(1) / 2;
  const int64_t k = T > 0 ? ids.numel() / T : 0;
  TANDEM_CHECK(F > 0 && D > 0 && gate_up.dim(1) == 2 * F && gate_up.dim(2) == D,
               "moe_experts: gate_up {} must be [E, 2F, {}]", gate_up.shape.str(), D);
  TANDEM_CHECK(down.dim(0) == E && down.dim(1) == D && down.dim(2) == F,
               "moe_experts: down {} must be [{}, {}, {}]", down.shape.str(), E, D, F);
  TANDEM_CHECK(out.rows() == T && out.cols() == D && out.data != x.data,
               "moe_experts: out {} must be a separate [{}, {}] tensor", out.shape.str(), T, D);
  TANDEM_CHECK(ids.numel() == T * k && weights.numel() == T * k,
               "moe_experts: ids {} and weights {} must both be [{}, k]", ids.shape.str(),
               weights.shape.str(), T);
  const auto groups = group_by_expert(weights.ptr<float>(), ids.ptr<int32_t>(), T, k, E);
  float* o = out.ptr<float>();
  std::fill(o, o + T * D, 0.f);
  ExpertScratch scratch;
  for (int64_t e = 0; e < E; e++) {
    if (groups[size_t(e)].empty()) continue;
    const ExpertWeights ew{
        static_cast<const char*>(gate_up.data) + size_t(e * 2 * F * D) * dtype_size(gate_up_dtype),
        static_cast<const char*>(down.data) + size_t(e * D * F) * dtype_size(down_dtype),
        gate_up_dtype, down_dtype, D, F};
    accumulate_expert(*pool_, o, x.ptr<float>(), groups[size_t(e)], ew, act, scratch);
  }
}

}  // namespace tandem
