// The CPU sampling op against hand-derived facts: greedy is the argmax, draws follow the
// (truncated) softmax, top-p/min-p cut where the definition says, penalties and logprobs
// equal hand-computed values, and a draw depends only on (seed, counter).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace sample_test {

std::vector<SampledToken> sample(Backend& be, const std::vector<float>& logits,
                                 std::vector<SampleRow> rows) {
  int64_t S = int64_t(rows.size()), V = int64_t(logits.size()) / S;
  Tensor t = test::device_f32(be, logits, {S, V});
  std::vector<SampledToken> out(rows.size());
  be.sample(t, rows, out);
  return out;
}

SampledToken sample_one(Backend& be, const std::vector<float>& logits, SampleRow row) {
  return sample(be, logits, {row})[0];
}

SampleRow sampled(float temperature, uint64_t seed = 1, uint64_t counter = 0) {
  SampleRow r;
  r.temperature = temperature;
  r.seed = seed;
  r.counter = counter;
  return r;
}

// Counts of the token drawn at counters 0..n-1.
std::map<int32_t, int> histogram(Backend& be, const std::vector<float>& logits, SampleRow row,
                                 int n) {
  std::map<int32_t, int> counts;
  for (int c = 0; c < n; c++) {
    row.counter = uint64_t(c);
    counts[sample_one(be, logits, row).token]++;
  }
  return counts;
}

// Pearson's chi-square of `counts` against probabilities `p` (tokens with p = 0 must
// never appear).
double chi_square(const std::map<int32_t, int>& counts, const std::vector<double>& p, int n) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); i++) {
    auto it = counts.find(int32_t(i));
    double got = it == counts.end() ? 0 : it->second;
    if (p[i] == 0) {
      EXPECT_EQ(got, 0) << "token " << i << " should never be drawn";
      continue;
    }
    double want = p[i] * n;
    chi2 += (got - want) * (got - want) / want;
  }
  return chi2;
}

std::vector<double> softmax(const std::vector<float>& l, double temperature) {
  double m = *std::max_element(l.begin(), l.end()), z = 0;
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); i++) z += p[i] = std::exp((l[i] - m) / temperature);
  for (double& x : p) x /= z;
  return p;
}

TEST(CpuSample, GreedyIsTheArgmaxLowestIdOnTies) {
  auto be = make_cpu_backend();
  EXPECT_EQ(sample_one(*be, {0.1f, 3.f, -1.f, 3.f, 2.9f}, {}).token, 1);
  EXPECT_EQ(sample_one(*be, {-1.f, -0.f, 0.f}, {}).token, 1);  // -0 == +0: a tie
  EXPECT_EQ(sample_one(*be, {-5.f, -2.f, -3.f}, {}).token, 1);
  float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(sample_one(*be, {ninf, ninf, -100.f}, {}).token, 2);
}

TEST(CpuSample, TopKOfOneIsGreedy) {
  auto be = make_cpu_backend();
  std::mt19937 rng(5);
  auto logits = test::random_vec(rng, 1000, -4.f, 4.f);
  int32_t argmax = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  SampleRow r = sampled(1.5f, 9);
  r.top_k = 1;
  for (uint64_t c = 0; c < 50; c++) {
    r.counter = c;
    EXPECT_EQ(sample_one(*be, logits, r).token, argmax);
  }
}

TEST(CpuSample, ADrawDependsOnlyOnSeedAndCounter) {
  auto be = make_cpu_backend();
  std::vector<float> logits(64, 0.f);  // uniform: every token is as likely
  auto run = [&](uint64_t seed) {
    std::vector<int32_t> tokens;
    for (uint64_t c = 0; c < 40; c++) tokens.push_back(sample_one(*be, logits, sampled(1.f, seed, c)).token);
    return tokens;
  };
  std::vector<int32_t> a = run(11);
  EXPECT_EQ(a, run(11));
  EXPECT_NE(a, run(12));
  EXPECT_GE(std::set<int32_t>(a.begin(), a.end()).size(), 20u);  // counters give fresh draws
}

TEST(CpuSample, RowsDoNotDependOnEachOther) {
  auto be = make_cpu_backend();
  std::mt19937 rng(3);
  const int S = 6, V = 300;
  auto logits = test::random_vec(rng, size_t(S * V), -3.f, 3.f);
  std::vector<SampleRow> rows;
  for (int s = 0; s < S; s++) {
    SampleRow r = sampled(s == 0 ? 0.f : 0.5f + 0.2f * float(s), uint64_t(100 + s), uint64_t(s));
    r.top_k = s == 2 ? 10 : 0;
    r.top_p = s == 3 ? 0.8f : 1.f;
    r.min_p = s == 4 ? 0.1f : 0.f;
    r.top_logprobs = s;
    rows.push_back(r);
  }
  auto batch = sample(*be, logits, rows);
  for (int s = 0; s < S; s++) {
    std::vector<float> row(logits.begin() + s * V, logits.begin() + (s + 1) * V);
    SampledToken solo = sample_one(*be, row, rows[size_t(s)]);
    EXPECT_EQ(batch[size_t(s)].token, solo.token) << "row " << s;
    EXPECT_EQ(batch[size_t(s)].logprob, solo.logprob);
    EXPECT_EQ(batch[size_t(s)].top_tokens, solo.top_tokens);
  }
}

TEST(CpuSample, FrequenciesFollowTheTemperatureSoftmax) {
  auto be = make_cpu_backend();
  std::vector<float> logits = {1.f, 0.5f, 0.f, -0.5f, -1.f, 2.f, -3.f, 0.25f};
  const int n = 40000;
  for (float t : {0.6f, 1.f, 1.7f}) {
    auto counts = histogram(*be, logits, sampled(t, 2024), n);
    EXPECT_LT(chi_square(counts, softmax(logits, t), n), 24.3) << "T " << t;  // 7 dof, p = .001
  }
}

// The truncated distribution the contract defines, in double on the sorted probabilities.
std::vector<double> truncated(const std::vector<float>& l, double t, int top_k, double top_p,
                              double min_p) {
  std::vector<double> p = softmax(l, t);
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  size_t keep = top_k > 0 ? size_t(top_k) : p.size();
  double mass_k = 0;
  for (size_t i = 0; i < keep; i++) mass_k += p[order[i]];
  double cum = 0;
  size_t n = 0;
  while (n < keep && (n == 0 || cum < top_p * mass_k)) cum += p[order[n++]];
  std::vector<double> out(p.size(), 0.0);
  double z = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || p[order[i]] >= min_p * p[order[0]]) z += out[order[i]] = p[order[i]];
  for (double& x : out) x /= z;
  return out;
}

TEST(CpuSample, FrequenciesFollowTheTruncatedSoftmax) {
  auto be = make_cpu_backend();
  std::vector<float> logits = {1.f, 0.5f, 0.f, -0.5f, -1.f, 2.f, -3.f, 0.25f, 1.5f, -2.f};
  const int n = 30000;
  // Chi-square at p = .001 for 1..9 degrees of freedom (kept tokens - 1).
  const double critical[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
  struct Case { float t; int k; float p; float min_p; };
  for (Case c : {Case{1.f, 4, 1.f, 0.f}, Case{0.8f, 0, 0.7f, 0.f}, Case{1.2f, 6, 0.9f, 0.f},
                 Case{1.f, 0, 1.f, 0.3f}, Case{1.4f, 7, 0.95f, 0.25f}}) {
    SCOPED_TRACE(testing::Message() << "T " << c.t << " k " << c.k << " p " << c.p << " min_p " << c.min_p);
    SampleRow r = sampled(c.t, 77);
    r.top_k = c.k;
    r.top_p = c.p;
    r.min_p = c.min_p;
    auto want = truncated(logits, c.t, c.k, c.p, c.min_p);
    int kept = int(std::count_if(want.begin(), want.end(), [](double x) { return x > 0; }));
    ASSERT_GE(kept, 2);
    EXPECT_LT(chi_square(histogram(*be, logits, r, n), want, n), critical[kept - 2]) << kept << " kept";
  }
}

std::set<int32_t> drawn(Backend& be, const std::vector<float>& logits, SampleRow r) {
  std::set<int32_t> s;
  for (auto& [token, count] : histogram(be, logits, r, 400)) s.insert(token);
  return s;
}

TEST(CpuSample, TopPCutsExactlyAtTheBoundary) {
  auto be = make_cpu_backend();
  std::vector<float> equal = {0.f, 0.f, 0.f, 0.f};  // each holds exactly a quarter
  SampleRow r = sampled(1.f, 5);
  r.top_p = 0.5f;  // two tokens reach exactly half: the third is not needed
  EXPECT_EQ(drawn(*be, equal, r), (std::set<int32_t>{0, 1}));
  r.top_p = std::nextafter(0.5f, 1.f);  // just above half needs a third
  EXPECT_EQ(drawn(*be, equal, r), (std::set<int32_t>{0, 1, 2}));
  r.top_p = 0.25f;
  EXPECT_EQ(drawn(*be, equal, r), (std::set<int32_t>{0}));
  // top-p is a fraction of the top-k mass: of 3 kept tokens, half needs two, 2/3 (the
  // float just above it) needs three.
  r.top_k = 3;
  r.top_p = 0.5f;
  EXPECT_EQ(drawn(*be, equal, r), (std::set<int32_t>{0, 1}));
  r.top_p = 2.f / 3.f;
  EXPECT_EQ(drawn(*be, equal, r), (std::set<int32_t>{0, 1, 2}));
  // p = 0.5, 0.3, 0.2 (sample order 1, 2, 0).
  std::vector<float> l = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  SampleRow q = sampled(1.f, 6);
  q.top_p = 0.49f;
  EXPECT_EQ(drawn(*be, l, q), (std::set<int32_t>{1}));
  q.top_p = 0.51f;
  EXPECT_EQ(drawn(*be, l, q), (std::set<int32_t>{1, 2}));
  q.top_p = 0.79f;
  EXPECT_EQ(drawn(*be, l, q), (std::set<int32_t>{1, 2}));
  q.top_p = 0.81f;
  EXPECT_EQ(drawn(*be, l, q), (std::set<int32_t>{0, 1, 2}));
}

TEST(CpuSample, MinPKeepsTokensWithinAFactorOfTheBest) {
  auto be = make_cpu_backend();
  SampleRow r = sampled(1.f, 8);
  r.min_p = 0.5f;
  EXPECT_EQ(drawn(*be, {3.f, 0.f, 0.f}, r), (std::set<int32_t>{0}));
  // exp(-0.69) = 0.5016 stays, exp(-0.70) = 0.4966 goes.
  EXPECT_EQ(drawn(*be, {0.f, -0.69f, -0.70f, -5.f}, r), (std::set<int32_t>{0, 1}));
  r.min_p = 2.f;  // nothing passes: the best token is kept anyway
  EXPECT_EQ(drawn(*be, {0.f, 0.f, -1.f}, r), (std::set<int32_t>{0}));
}

TEST(CpuSample, NegativeInfinityIsNeverDrawn) {
  auto be = make_cpu_backend();
  float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(drawn(*be, {ninf, 0.f, ninf, 0.f, ninf}, sampled(2.f, 3)), (std::set<int32_t>{1, 3}));
}

double log_sum_exp(const std::vector<double>& l) {
  double m = *std::max_element(l.begin(), l.end()), z = 0;
  for (double x : l) z += std::exp(x - m);
  return m + std::log(z);
}

TEST(CpuSample, PenaltiesMatchHandComputedValues) {
  auto be = make_cpu_backend();
  SampleRow r;  // greedy
  r.repetition_penalty = 2.f;
  r.presence_penalty = 0.5f;
  r.frequency_penalty = 0.25f;
  r.penalty_tokens = {0, 1, 3};  // token 0 twice in the output, 1 in the prompt, 3 once
  r.output_counts = {2, 0, 1};
  r.top_logprobs = 4;
  SampledToken t = sample_one(*be, {2.f, -2.f, 1.f, 0.5f}, r);
  // 2/2 - (0.5 + 2·0.25) = 0;  -2·2 = -4;  1 untouched;  0.5/2 - (0.5 + 0.25) = -0.5
  std::vector<double> pen = {0.0, -4.0, 1.0, -0.5};
  double lz = log_sum_exp(pen);
  EXPECT_EQ(t.token, 2);
  EXPECT_NEAR(t.logprob, 1.0 - lz, 1e-6);
  ASSERT_EQ(t.top_tokens, (std::vector<int32_t>{2, 0, 3, 1}));
  for (size_t i = 0; i < 4; i++)
    EXPECT_NEAR(t.top_logprobs[i], pen[size_t(t.top_tokens[i])] - lz, 1e-6);
  // Frequency alone flips greedy's choice: 3 - 2·1 < 2.
  SampleRow f;
  f.frequency_penalty = 2.f;
  f.penalty_tokens = {0};
  f.output_counts = {1};
  EXPECT_EQ(sample_one(*be, {3.f, 2.f}, f).token, 1);
}

TEST(CpuSample, LogprobsAreTheLogSoftmaxBeforeTemperature) {
  auto be = make_cpu_backend();
  std::mt19937 rng(4);
  auto logits = test::random_vec(rng, 100, -5.f, 5.f);
  logits[17] = logits[42] = 9.f;  // a tie at the top: lowest id first
  std::vector<double> l(logits.begin(), logits.end());
  double lz = log_sum_exp(l);
  SampleRow r = sampled(0.7f, 1, 3);
  r.top_logprobs = 5;
  SampledToken t = sample_one(*be, logits, r);
  EXPECT_NEAR(t.logprob, l[size_t(t.token)] - lz, 1e-5);
  std::vector<size_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  ASSERT_EQ(t.top_tokens.size(), 5u);
  EXPECT_EQ(t.top_tokens[0], 17);
  EXPECT_EQ(t.top_tokens[1], 42);
  for (size_t i = 0; i < 5; i++) {
    EXPECT_EQ(t.top_tokens[i], int32_t(order[i]));
    EXPECT_NEAR(t.top_logprobs[i], l[order[i]] - lz, 1e-5);
  }
  r.top_logprobs = 0;  // the chosen token's only
  SampledToken only = sample_one(*be, logits, r);
  EXPECT_EQ(only.token, t.token);
  EXPECT_TRUE(only.top_tokens.empty());
  EXPECT_NEAR(only.logprob, t.logprob, 1e-7);
}

TEST(CpuSample, RejectsMalformedRows) {
  auto be = make_cpu_backend();
  auto bad = [&](SampleRow r, const char* what) {
    try {
      sample_one(*be, {0.f, 1.f, 2.f}, r);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  SampleRow twice;
  twice.penalty_tokens = {1, 1};
  twice.output_counts = {0, 1};
  bad(twice, "listed twice");
  SampleRow outside;
  outside.penalty_tokens = {3};
  outside.output_counts = {1};
  bad(outside, "outside the vocabulary");
  SampleRow uneven;
  uneven.penalty_tokens = {0};
  bad(uneven, "output counts");
  SampleRow many;
  many.top_logprobs = 21;
  bad(many, "top_logprobs");
  SampleRow zero_p = sampled(1.f);
  zero_p.top_p = 0.f;
  bad(zero_p, "top_p");
  std::vector<uint32_t> two_words = {7u, 0u}, none = {0u}, past_the_end = {0xFFFFFFF8u};
  SampleRow long_mask;
  long_mask.allowed = two_words;
  bad(long_mask, "mask of 2 words");
  SampleRow empty_mask;
  empty_mask.allowed = none;
  bad(empty_mask, "allows no token");
  SampleRow only_padding;  // bits 3.. lie past the 3-token vocabulary
  only_padding.allowed = past_the_end;
  bad(only_padding, "allows no token");
}

// A mask over `vocab` tokens allowing `ids`.
std::vector<uint32_t> mask_of(std::initializer_list<int> ids, int vocab) {
  std::vector<uint32_t> words(size_t((vocab + 31) / 32), 0u);
  for (int id : ids) words[size_t(id >> 5)] |= 1u << (id & 31);
  return words;
}

TEST(CpuSample, GreedyPicksTheBestAllowedToken) {
  auto be = make_cpu_backend();
  std::mt19937 rng(9);
  auto logits = test::random_vec(rng, 70, -4.f, 4.f);
  logits[5] = 10.f;  // the argmax, masked out below
  logits[40] = 3.f;
  logits[66] = 3.5f;
  std::vector<uint32_t> allowed = mask_of({40, 66, 2}, 70);
  SampleRow r;
  r.allowed = allowed;
  r.top_logprobs = 5;
  SampledToken t = sample_one(*be, logits, r);
  EXPECT_EQ(t.token, std::max(logits[2], 3.5f) == 3.5f ? 66 : 2);
  // Logprobs are those of the constrained distribution, and only allowed tokens are listed.
  std::vector<double> kept = {logits[2], logits[40], logits[66]};
  double lz = log_sum_exp(kept);
  EXPECT_NEAR(t.logprob, logits[size_t(t.token)] - lz, 1e-5);
  ASSERT_EQ(t.top_tokens.size(), 3u);
  for (size_t i = 0; i < 3; i++) EXPECT_TRUE(t.top_tokens[i] == 2 || t.top_tokens[i] == 40 || t.top_tokens[i] == 66);
}

TEST(CpuSample, DrawsFollowTheSoftmaxOverAllowedTokens) {
  auto be = make_cpu_backend();
  std::vector<float> logits = {1.f, 0.5f, 0.f, -0.5f, -1.f, 2.f, -3.f, 0.25f};
  std::vector<uint32_t> allowed = mask_of({0, 2, 3, 7}, 8);
  std::vector<float> masked = logits;
  for (int i : {1, 4, 5, 6}) masked[size_t(i)] = -std::numeric_limits<float>::infinity();
  const int n = 30000;
  for (float t : {0.7f, 1.f}) {
    SampleRow r = sampled(t, 77);
    r.allowed = allowed;
    r.top_k = 3;  // top-k, penalties and min-p all see only the allowed tokens
    r.repetition_penalty = 1.2f;
    r.penalty_tokens = {5, 0};
    r.output_counts = {2, 0};
    r.min_p = 0.05f;
    std::vector<float> want_logits = masked;
    want_logits[0] = logits[0] / 1.2f;
    auto counts = histogram(*be, logits, r, n);
    EXPECT_LT(chi_square(counts, truncated(want_logits, t, 3, 1.0, 0.05), n), 13.8) << t;  // 2 dof
  }
}

// Speculative decoding: the sampling op's acceptance test for a draft model's proposals
// (backend/sampling.h, step 5) on the CPU: a proposal drawn from q and checked against p leaves the
// output distributed as p (chi-square over many counters, for p and q far apart, with top-k and
// top-p cuts in both); proposals p favours at least as much as q are always accepted; a
// rejected proposal is never the output, which then lies where p exceeds q; a draw is a
// pure function of (seed, counter); bad draft rows are refused naming the row.

constexpr int kVocab = 6;

SampleRow row(float temperature, uint64_t counter, int top_k = 0, float top_p = 1.f) {
  SampleRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.seed = 77;
  r.counter = counter;
  return r;
}

// The draft's draw from q (its own stream), then the target's check of it against p.
struct Checked {
  int32_t proposal = 0;
  int32_t token = 0;
};

Checked draw_and_check(Backend& be, const std::vector<float>& p_logits,
                       const std::vector<float>& q_logits, SampleRow r) {
  Tensor q = test::device_f32(be, q_logits, {1, kVocab});
  SampleRow draft = r;
  draft.counter |= uint64_t(1) << 63;
  std::vector<SampledToken> proposal(1);
  be.sample(q, std::vector<SampleRow>{draft}, proposal);
  Tensor p = test::device_f32(be, p_logits, {1, kVocab});
  Tensor q_again = test::device_f32(be, q_logits, {1, kVocab});
  r.draft = DraftCheck{proposal[0].token, 0};
  std::vector<SampledToken> out(1);
  be.sample(p, std::vector<SampleRow>{r}, out, &q_again);
  return {proposal[0].token, out[0].token};
}

// p_i ∝ exp(l_i / T) over the tokens top-k and top-p keep.
std::vector<double> target_distribution(const std::vector<float>& logits, float temperature,
                                        int top_k, float top_p) {
  std::vector<int> order(kVocab);
  for (int i = 0; i < kVocab; i++) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  std::vector<double> p(kVocab, 0.0);
  double z = 0;
  for (int i : order) z += std::exp(double(logits[size_t(i)]) / temperature);
  const int k = top_k > 0 ? top_k : kVocab;
  double mass = 0, kept_z = 0;
  for (int j = 0; j < k; j++) {
    const int i = order[size_t(j)];
    p[size_t(i)] = std::exp(double(logits[size_t(i)]) / temperature);
    kept_z += p[size_t(i)];
  }
  double target = top_p * kept_z;
  for (int j = 0; j < k; j++) {
    const int i = order[size_t(j)];
    if (mass >= target) p[size_t(i)] = 0;
    mass += std::exp(double(logits[size_t(i)]) / temperature);
  }
  z = 0;
  for (double x : p) z += x;
  for (double& x : p) x /= z;
  return p;
}

TEST(SpecSample, DraftProposalsCheckedAgainstTheTargetFollowTheTarget) {
  auto be = make_cpu_backend();
  const std::vector<float> p = {2.0f, 0.5f, 1.5f, -1.0f, 0.0f, 1.0f};
  const std::vector<float> q = {0.0f, 2.5f, 0.2f, 1.0f, -0.5f, 1.2f};  // far from p
  struct Cut {
    float temperature;
    int top_k;
    float top_p;
  };
  for (Cut c : {Cut{1.f, 0, 1.f}, Cut{0.7f, 4, 1.f}, Cut{1.3f, 0, 0.8f}}) {
    SCOPED_TRACE(testing::Message()
                 << "T " << c.temperature << " top_k " << c.top_k << " top_p " << c.top_p);
    const int n = 20000;
    std::map<int32_t, int> counts;
    int accepted = 0;
    for (int i = 0; i < n; i++) {
      Checked ch = draw_and_check(*be, p, q, row(c.temperature, uint64_t(i), c.top_k, c.top_p));
      counts[ch.token]++;
      accepted += ch.token == ch.proposal;
    }
    // 5 degrees of freedom at most: the 0.1% critical value is 20.5.
    EXPECT_LT(chi_square(counts, target_distribution(p, c.temperature, c.top_k, c.top_p), n), 20.5);
    EXPECT_GT(accepted, n / 10);      // the rule does accept
    EXPECT_LT(accepted, n * 9 / 10);  // ... and reject
  }
}

// The same check with a deliberately wrong rule (accepting every proposal) would give q,
// not p: the chi-square above has the power to tell them apart.
TEST(SpecSample, TheChiSquareTellsQFromP) {
  auto be = make_cpu_backend();
  const std::vector<float> p = {2.0f, 0.5f, 1.5f, -1.0f, 0.0f, 1.0f};
  const std::vector<float> q = {0.0f, 2.5f, 0.2f, 1.0f, -0.5f, 1.2f};
  const int n = 20000;
  std::map<int32_t, int> proposals;
  for (int i = 0; i < n; i++)
    proposals[draw_and_check(*be, p, q, row(1.f, uint64_t(i))).proposal]++;
  EXPECT_GT(chi_square(proposals, target_distribution(p, 1.f, 0, 1.f), n), 1000.0);
}

TEST(SpecSample, AcceptanceFollowsTheRatio) {
  auto be = make_cpu_backend();
  const std::vector<float> logits = {1.0f, 0.0f, 0.5f, -0.5f, 0.2f, 0.1f};
  // p == q: every proposal is accepted.
  for (int i = 0; i < 200; i++) {
    Checked ch = draw_and_check(*be, logits, logits, row(1.f, uint64_t(i)));
    EXPECT_EQ(ch.token, ch.proposal) << "counter " << i;
  }
  // q puts less on token 0 than p: a proposal of 0 is always accepted; a rejected proposal
  // is never emitted, and what is emitted instead has p > q.
  const std::vector<float> q = {0.0f, 1.0f, 0.5f, -0.5f, 0.2f, 0.1f};
  const std::vector<double> pd = target_distribution(logits, 1.f, 0, 1.f);
  const std::vector<double> qd = target_distribution(q, 1.f, 0, 1.f);
  int rejected = 0;
  for (int i = 0; i < 2000; i++) {
    Checked ch = draw_and_check(*be, logits, q, row(1.f, uint64_t(i)));
    if (ch.proposal == 0) EXPECT_EQ(ch.token, 0);
    if (ch.token != ch.proposal) {
      rejected++;
      EXPECT_GT(pd[size_t(ch.token)], qd[size_t(ch.token)]) << "counter " << i;
    }
  }
  EXPECT_GT(rejected, 0);
  // Pure function of (seed, counter).
  EXPECT_EQ(draw_and_check(*be, logits, q, row(1.f, 5)).token,
            draw_and_check(*be, logits, q, row(1.f, 5)).token);
}

TEST(SpecSample, RefusesBadDraftRows) {
  auto be = make_cpu_backend();
  const std::vector<float> logits(kVocab, 0.f);
  Tensor p = test::device_f32(*be, logits, {1, kVocab});
  Tensor q = test::device_f32(*be, logits, {1, kVocab});
  std::vector<SampledToken> out(1);
  SampleRow r = row(1.f, 0);
  r.draft = DraftCheck{kVocab, 0};
  EXPECT_THROW(be->sample(p, std::vector<SampleRow>{r}, out, &q), Error);
  r.draft = DraftCheck{1, 1};  // q has one row
  try {
    be->sample(p, std::vector<SampleRow>{r}, out, &q);
    ADD_FAILURE() << "a draft row past the draft logits was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("draft logits row 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(be->sample(p, std::vector<SampleRow>{r}, out), Error);  // no draft logits at all
}

}  // namespace sample_test
}  // namespace tandem
