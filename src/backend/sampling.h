// Sampling as a backend op: the engine resolves each row's parameters into a SampleRow,
// the backend picks the tokens where the logits live (the GPU keeps [S, V] on the device;
// only ids and requested logprobs come back).
//
// The function both backends compute for each row, in order (l = the row's logits):
//   0. mask (a constrained row's grammar, SampleRow::allowed): l[t] = -inf for every token
//      t whose bit (bit t & 31 of word t >> 5) is clear, so every later step sees only
//      allowed tokens (the logprobs too: they are those of the constrained distribution);
//   1. penalties, for each listed token t (HF repetition over prompt and output, OpenAI
//      presence/frequency over the output only):
//        l[t] = penalized_logit(l[t], repetition_penalty, penalty_offset(t))
//      i.e. l / r if l > 0 else l · r, minus presence·[count > 0] + frequency·count;
//   2. logprobs (top_logprobs >= 0): log_softmax of the penalized logits, before
//      temperature; the chosen token's, and the top_logprobs best in sample order;
//   3. "sample order": descending logit, lowest id first on ties (sample_order_key);
//      greedy (temperature <= 0): the first token of that order;
//   4. otherwise, with s_i = (l_i - l_max) / T and p_i = exp(s_i) (so p_max = 1), a token
//      is kept when it is all of:
//        - among the first top_k of the order (top_k > 0);
//        - within the smallest prefix of the order whose mass reaches top_p of the mass of
//          the top_k tokens (top_p < 1), masses being q_i = floor(p_i · 2^40) summed as
//          integers and the target ceil(top_p · Σ q) (top_p_target);
//        - p_i >= min_p, or the first of the order;
//      the draw is the kept token with the largest s_i + g_i, g_i = -log(-log(u_i)),
//      u_i = philox_uniform(seed, counter, i) (lowest id if two tie). This is the
//      Gumbel-max trick: P(i) = p_i / Σ_kept p_j, exactly the renormalized softmax HF
//      and vLLM draw from (vLLM's exponential-race sampler is the same trick).
//   5. speculative decoding's acceptance test, for a row with `draft` (below): q is the
//      distribution step 4 draws from, computed from row draft->q_row of the op's draft
//      logits with this row's temperature, top_k, top_p and min_p (no mask, no
//      penalties: what the draft model's own draw sampled from), p the distribution of
//      step 4 over this row's logits; with u = philox_uniform(seed, counter, kAcceptIndex),
//      the token is draft->token when u · q(token) < p(token) (accepted with probability
//      min(1, p/q)), else the Gumbel-max draw (same u_i as step 4) from the residual
//      r_i = max(0, p_i − q_i), i.e. token i with probability r_i / Σ r (step 4's draw
//      when Σ r = 0). Greedy rows ignore `draft` (their token is step 3's).
// The draw depends only on (seed, counter) — never on the other rows — so a seeded
// request gets the same tokens whatever else runs, on either backend.
//
// Why this form: the GPU needs no sort for rows without top-k/top-p (an argmax over the
// vocabulary), and no prefix sum at all (top-k/top-p cuts are radix selections over the
// sample-order key). Every step is bit-exact on both backends (integer masses make the
// top-p sum independent of summation order; arithmetic is in double with no fusable
// multiply-add) except exp and log, whose last bit may differ between libm and CUDA: the
// backends then disagree only when two Gumbel scores tie within ~1e-15, or a top-p/min-p
// boundary lands within ~1e-12 of its threshold. The shared formulas: sample_math.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tandem {

// The most top_logprobs a row may ask for (OpenAI's limit).
constexpr int kMaxSampleTopLogprobs = 20;

// The Philox index of the acceptance test's uniform (step 5): past every vocabulary index.
constexpr uint64_t kAcceptIndex = uint64_t(1) << 32;

// A proposal the draft model drew (step 5): the token, and the row of the op's draft
// logits it was drawn from.
struct DraftCheck {
  int32_t token = 0;
  int32_t q_row = 0;
};

struct SampleRow {
  float temperature = 0.f;  // <= 0: greedy
  int top_k = 0;            // 0 = off
  float top_p = 1.f;        // >= 1 = off
  float min_p = 0.f;        // 0 = off
  float repetition_penalty = 1.f;
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  uint64_t seed = 0;        // the row's random stream
  uint64_t counter = 0;     // which draw of that stream (tokens generated so far)
  int top_logprobs = -1;    // -1: none; 0: the chosen token's; k <= 20: and the k best
  // Penalty inputs (empty when no penalty is on): the DISTINCT tokens of prompt ∪ output,
  // and how many times each occurs in the output (0: prompt only).
  std::vector<int32_t> penalty_tokens;
  std::vector<int32_t> output_counts;
  // The tokens a grammar allows next (step 0), ceil(V / 32) words; empty: all of them.
  // Points at memory the caller keeps alive until the op has been issued (the CUDA op
  // copies it into its upload; the CPU op reads it while sampling). At least one bit set.
  std::span<const uint32_t> allowed;
  // Speculative decoding with a draft model: the proposal this position checks (step 5).
  std::optional<DraftCheck> draft;

  // presence·[count > 0] + frequency·count for penalty entry j (exact in double, so
  // identical whether or not the compiler fuses the multiply-add).
  float penalty_offset(size_t j) const {
    int32_t n = output_counts[j];
    if (n == 0) return 0.f;
    return float(double(presence_penalty) + double(frequency_penalty) * double(n));
  }
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.f;                           // when top_logprobs >= 0
  std::vector<int32_t> top_tokens;               // best first
  std::vector<float> top_logprobs;
};

// Fails (tandem::Error naming `op`, the row and the value) unless every row fits a
// vocabulary of `vocab`: penalty lists of equal length with distinct in-range tokens and
// counts >= 0, top_k >= 0, top_logprobs in [-1, 20], finite temperature and top_p > 0,
// a mask, when there is one, of ceil(vocab / 32) words allowing some token, and a draft
// check, when there is one, naming a token of the vocabulary and one of `num_q_rows` draft
// logits rows.
void check_sample_rows(std::span<const SampleRow> rows, int64_t vocab, std::string_view op,
                       int64_t num_q_rows = 0);

}  // namespace tandem
