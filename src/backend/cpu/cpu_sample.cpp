// The sampling op on the CPU: the reference for the function in backend/sampling.h, row by
// row, with the per-token formulas of backend/sample_math.h. Rows are independent (their
// own Philox stream), so they run in parallel on the pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/sample_math.h"

namespace tandem {

namespace {

// Step 0: tokens the row's grammar does not allow get -inf, which every later step
// (penalties, order, masses, Gumbel scores, log_softmax) keeps out of the running.
void apply_mask(float* logits, int64_t vocab, const SampleRow& r) {
  if (r.allowed.empty()) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; i++)
    if (!(r.allowed[size_t(i >> 5)] >> (i & 31) & 1u)) logits[i] = kNegInf;
}

void apply_penalties(float* logits, const SampleRow& r) {
  for (size_t j = 0; j < r.penalty_tokens.size(); j++) {
    float& l = logits[r.penalty_tokens[j]];
    l = penalized_logit(l, r.repetition_penalty, r.penalty_offset(j));
  }
}

// The first token of the sample order: the largest logit, lowest id on ties.
int32_t first_in_order(const float* logits, int64_t vocab) {
  uint64_t best = sample_order_rank(logits[0], 0);
  for (int64_t i = 1; i < vocab; i++) best = std::min(best, sample_order_rank(logits[i], int32_t(i)));
  return int32_t(best & 0xFFFFFFFFu);
}

// The `n` first tokens of the sample order, in that order.
std::vector<int32_t> first_n_in_order(const float* logits, int64_t vocab, int64_t n) {
  std::vector<uint64_t> ranks(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; i++) ranks[size_t(i)] = sample_order_rank(logits[i], int32_t(i));
  std::partial_sort(ranks.begin(), ranks.begin() + n, ranks.end());
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) ids[size_t(i)] = int32_t(ranks[size_t(i)] & 0xFFFFFFFFu);
  return ids;
}

// Tokens that survive top-k and top-p, in sample order; all tokens (in id order) when
// neither is on. min-p is a per-token test left to the draw.
std::vector<int32_t> top_k_top_p(const float* logits, int64_t vocab, const SampleRow& r,
                                 float l_max) {
  bool use_k = r.top_k > 0 && r.top_k < vocab;
  bool use_p = r.top_p < 1.f;
  if (!use_k && !use_p) {
    std::vector<int32_t> all(static_cast<size_t>(vocab));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  std::vector<int32_t> kept = first_n_in_order(logits, vocab, use_k ? r.top_k : vocab);
  if (use_p) {
    auto mass = [&](int32_t i) {
      return sample_mass(scaled_logit(logits[i], l_max, r.temperature));
    };
    uint64_t total = 0;
    for (int32_t i : kept) total += mass(i);
    uint64_t target = top_p_target(r.top_p, total), cum = 0;
    size_t n = 0;
    while (cum < target) cum += mass(kept[n++]);  // the top token alone has mass 2^40
    kept.resize(n);
  }
  return kept;
}

// The kept token with the largest Gumbel score (lowest id on ties; NaN never wins).
int32_t draw(const float* logits, int64_t vocab, const SampleRow& r, int32_t first) {
  float l_max = logits[first];
  bool found = false;
  double best = 0;
  int32_t best_id = first;
  for (int32_t i : top_k_top_p(logits, vocab, r, l_max)) {
    double s = scaled_logit(logits[i], l_max, r.temperature);
    if (i != first && !passes_min_p(s, r.min_p)) continue;
    double g = gumbel_score(s, r.seed, r.counter, i);
    if (std::isnan(g)) continue;
    if (!found || g > best || (g == best && i < best_id)) {
      found = true;
      best = g;
      best_id = i;
    }
  }
  return best_id;
}

// The distribution the draw samples from (step 4): p_i ∝ exp(s_i) over the kept tokens,
// 0 elsewhere; dense over the vocabulary, in double.
std::vector<double> kept_distribution(const float* logits, int64_t vocab, const SampleRow& r,
                                      int32_t first) {
  const float l_max = logits[first];
  std::vector<double> p(size_t(vocab), 0.0);
  double z = 0;
  for (int32_t i : top_k_top_p(logits, vocab, r, l_max)) {
    const double s = scaled_logit(logits[i], l_max, r.temperature);
    if (std::isnan(s) || (i != first && !passes_min_p(s, r.min_p))) continue;
    p[size_t(i)] = std::exp(s);
    z += p[size_t(i)];
  }
  for (double& x : p) x /= z;  // z >= 1: the first token has s = 0
  return p;
}

// Step 5: the draft's proposal, accepted with probability min(1, p/q), else a draw from
// the residual max(0, p − q) (step 4's draw when nothing is left of it).
int32_t check_draft(const float* logits, int64_t vocab, const SampleRow& r, int32_t first,
                    const float* q_logits) {
  const std::vector<double> p = kept_distribution(logits, vocab, r, first);
  const std::vector<double> q = kept_distribution(q_logits, vocab, r, first_in_order(q_logits, vocab));
  const int32_t d = r.draft->token;
  const double u = philox_uniform(r.seed, r.counter, kAcceptIndex);
  if (u * q[size_t(d)] < p[size_t(d)]) return d;
  bool found = false;
  double best = 0;
  int32_t best_id = first;
  for (int64_t i = 0; i < vocab; i++) {
    const double residual = p[size_t(i)] - q[size_t(i)];
    if (!(residual > 0)) continue;
    const double g = gumbel_score(std::log(residual), r.seed, r.counter, int32_t(i));
    if (!found || g > best) {  // ascending ids: the lowest wins a tie
      found = true;
      best = g;
      best_id = int32_t(i);
    }
  }
  return found ? best_id : draw(logits, vocab, r, first);
}

// log_softmax at the chosen token and the k best in sample order.
void fill_logprobs(const float* logits, int64_t vocab, int k, int32_t first, SampledToken& out) {
  double l_max = logits[first], sum = 0;
  for (int64_t i = 0; i < vocab; i++) sum += std::exp(double(logits[i]) - l_max);
  double log_z = l_max + std::log(sum);
  out.logprob = float(double(logits[out.token]) - log_z);
  out.top_tokens.clear();
  out.top_logprobs.clear();
  if (k <= 0) return;
  for (int32_t id : first_n_in_order(logits, vocab, std::min<int64_t>(k, vocab))) {
    if (std::isinf(logits[id]) && logits[id] < 0) break;  // masked out: not a candidate
    out.top_tokens.push_back(id);
    out.top_logprobs.push_back(float(double(logits[id]) - log_z));
  }
}

// `q_logits`: the draft logits row of r.draft (null without one).
SampledToken sample_row(float* logits, int64_t vocab, const SampleRow& r, const float* q_logits) {
  apply_mask(logits, vocab, r);
  apply_penalties(logits, r);
  int32_t first = first_in_order(logits, vocab);
  SampledToken out;
  if (r.temperature <= 0.f) out.token = first;
  else if (q_logits) out.token = check_draft(logits, vocab, r, first, q_logits);
  else out.token = draw(logits, vocab, r, first);
  if (r.top_logprobs >= 0) fill_logprobs(logits, vocab, r.top_logprobs, first, out);
  return out;
}

}  // namespace

void CpuBackend::sample(Tensor& logits, std::span<const SampleRow> rows,
                        std::span<SampledToken> out, const Tensor* draft_logits) {
  cpu::check_tensor(logits, DType::F32, "sample", "logits");
  cpu::check_ndim(logits, 2, "sample", "logits");
  int64_t S = logits.dim(0), V = logits.dim(1);
  if (int64_t(rows.size()) != S || int64_t(out.size()) != S)
    fail("sample: logits have {} rows but {} SampleRows and {} outputs", S, rows.size(), out.size());
  int64_t Q = 0;
  if (draft_logits) {
    cpu::check_tensor(*draft_logits, DType::F32, "sample", "draft_logits");
    cpu::check_ndim(*draft_logits, 2, "sample", "draft_logits");
    if (draft_logits->dim(1) != V)
      fail("sample: draft logits have {} columns, the logits {}", draft_logits->dim(1), V);
    Q = draft_logits->dim(0);
  }
  check_sample_rows(rows, V, "sample", Q);
  float* base = logits.ptr<float>();
  cpu::parallel_for(*pool_, S, V * 64, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; s++) {
      const SampleRow& r = rows[size_t(s)];
      const float* q = r.draft ? draft_logits->ptr<float>() + int64_t(r.draft->q_row) * V : nullptr;
      out[size_t(s)] = sample_row(base + s * V, V, r, q);
    }
  });
}

}  // namespace tandem
