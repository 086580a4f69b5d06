// The CUDA sampling op against the CPU twin: the same logits (bf16-representable, so both
// backends see identical values) and the same SampleRows must pick the same tokens for
// every kind of row — greedy, temperature, top-k, top-p, min-p, penalties — over many
// seeds and counters; logprobs agree within 1e-2 and the top-logprob tokens exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "backend/backend.h"
#include "core/dtype.h"

namespace tandem {
namespace cuda_sample_test {

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine"

// Normal(0, scale) logits rounded to bf16; `masked` of them (at random) are -inf.
std::vector<float> bf16_logits(std::mt19937& rng, size_t n, float scale, double masked = 0) {
  std::normal_distribution<float> normal(0.f, scale);
  std::bernoulli_distribution mask(masked);
  std::vector<float> v(n);
  for (float& x : v)
    x = mask(rng) ? -std::numeric_limits<float>::infinity() : bf16_to_f32(f32_to_bf16(normal(rng)));
  return v;
}

void add_penalties(std::mt19937& rng, int vocab, SampleRow& r) {
  std::set<int32_t> tokens;
  std::uniform_int_distribution<int32_t> token(0, vocab - 1), count(0, 3);
  while (tokens.size() < 40) tokens.insert(token(rng));
  for (int32_t t : tokens) {
    r.penalty_tokens.push_back(t);
    r.output_counts.push_back(count(rng));
  }
  r.repetition_penalty = 1.3f;
  r.presence_penalty = 0.4f;
  r.frequency_penalty = 0.3f;
}

// Row `s` of a menu covering every path of the op, with its own seed and a random counter.
SampleRow menu_row(std::mt19937& rng, int s, int vocab) {
  SampleRow r;
  r.seed = 1000003ull * uint64_t(s) + rng();
  r.counter = rng() % 5000;
  r.top_logprobs = s % 22 - 1;  // -1 .. 20
  switch (s % 11) {
    case 0: break;  // greedy
    case 1: r.temperature = 1.f; break;
    case 2: r.temperature = 0.6f; r.top_k = 1; break;
    case 3: r.temperature = 1.2f; r.top_k = 50; break;
    case 4: r.temperature = 0.8f; r.top_p = 0.9f; break;
    case 5: r.temperature = 1.f; r.top_k = 20; r.top_p = 0.5f; break;
    case 6: r.temperature = 0.7f; r.min_p = 0.1f; break;
    case 7: r.temperature = 1.f; r.top_k = 1000; r.top_p = 0.95f; r.min_p = 0.02f; break;
    case 8: add_penalties(rng, vocab, r); break;  // greedy with penalties
    case 9: r.temperature = 1.1f; r.top_p = 0.8f; add_penalties(rng, vocab, r); break;
    case 10: r.temperature = 2.f; r.top_p = 0.99f; break;
  }
  return r;
}

std::vector<SampledToken> run(Backend& be, const std::vector<float>& logits, int64_t S, int64_t V,
                              DType dtype, const std::vector<SampleRow>& rows) {
  Tensor host = Tensor::borrow(const_cast<float*>(logits.data()), DType::F32, {S, V});
  Tensor t = be.upload(host, dtype);
  std::vector<SampledToken> out(static_cast<size_t>(S));
  for (auto& o : out) o.token = -12345;  // poison
  be.sample(t, rows, out);
  return out;
}

void expect_same(const std::vector<SampledToken>& gpu, const std::vector<SampledToken>& cpu,
                 const std::vector<SampleRow>& rows) {
  for (size_t s = 0; s < rows.size(); s++) {
    SCOPED_TRACE(testing::Message() << "row " << s << " (menu " << s % 11 << ", seed "
                                    << rows[s].seed << ", counter " << rows[s].counter << ")");
    EXPECT_EQ(gpu[s].token, cpu[s].token);
    if (rows[s].top_logprobs < 0) continue;
    EXPECT_NEAR(gpu[s].logprob, cpu[s].logprob, 1e-2);
    EXPECT_EQ(gpu[s].top_tokens, cpu[s].top_tokens);
    ASSERT_EQ(gpu[s].top_logprobs.size(), cpu[s].top_logprobs.size());
    for (size_t k = 0; k < cpu[s].top_logprobs.size(); k++)
      EXPECT_NEAR(gpu[s].top_logprobs[k], cpu[s].top_logprobs[k], 1e-2);
  }
}

// A grammar-style mask over V tokens: each allowed with probability `density`, and at
// least one always (token `always`).
std::vector<uint32_t> random_mask(std::mt19937& rng, int V, double density, int always) {
  std::bernoulli_distribution allow(density);
  std::vector<uint32_t> words(size_t((V + 31) / 32), 0u);
  for (int i = 0; i < V; i++)
    if (i == always || allow(rng)) words[size_t(i >> 5)] |= 1u << (i & 31);
  return words;
}

// Rounds of S rows each at vocabulary V; `scale` sets how spread (and how tied) the
// bf16 logits are; with `grammar_density`, two rows in three carry a mask allowing about
// that fraction of the vocabulary (the others none, as in a mixed batch).
void compare(int rounds, int S, int V, float scale, double masked, DType gpu_dtype,
             double grammar_density = 0) {
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(uint32_t(V) * 31u + uint32_t(S) + uint32_t(scale * 100));
  for (int round = 0; round < rounds; round++) {
    SCOPED_TRACE(testing::Message() << "V " << V << " round " << round << " scale " << scale);
    auto logits = bf16_logits(rng, size_t(S) * size_t(V), scale, masked);
    std::vector<SampleRow> rows;
    std::vector<std::vector<uint32_t>> masks(static_cast<size_t>(S));
    for (int s = 0; s < S; s++) {
      rows.push_back(menu_row(rng, s + round, V));
      if (grammar_density > 0 && s % 3 != 0) {
        masks[size_t(s)] = random_mask(rng, V, grammar_density, (s * 7919) % V);
        rows.back().allowed = masks[size_t(s)];
      }
    }
    expect_same(run(*gpu, logits, S, V, gpu_dtype, rows), run(*cpu, logits, S, V, DType::F32, rows),
                rows);
  }
}

TEST(CudaSample, MatchesCpuOnASmallVocabulary) {
  SKIP_WITHOUT_GPU();
  compare(/*rounds=*/12, /*S=*/44, /*V=*/512, /*scale=*/2.f, 0.0, DType::BF16);
}

TEST(CudaSample, MatchesCpuWithManyTiedLogits) {
  SKIP_WITHOUT_GPU();
  // Small logits in bf16 take few distinct values: top-k/top-p cuts fall inside ties.
  compare(6, 33, 512, 0.05f, 0.0, DType::BF16);
  compare(2, 22, 151936, 0.3f, 0.0, DType::BF16);
}

TEST(CudaSample, MatchesCpuOnAQwenSizedVocabulary) {
  SKIP_WITHOUT_GPU();
  compare(3, 22, 151936, 3.f, 0.0, DType::BF16);
}

TEST(CudaSample, MatchesCpuWithMaskedTokensAndF32Logits) {
  SKIP_WITHOUT_GPU();
  compare(4, 22, 512, 2.f, 0.3, DType::BF16);
  compare(4, 22, 1000, 1.5f, 0.0, DType::F32);  // f32 logits are worked on in place
}

// Step 0 of the function: grammar masks, dense and sparse (one allowed token), on bf16
// logits (copied) and f32 ones (masked in place), with a vocabulary that is not a multiple
// of 32 and with few rows (the wide first-in-order scan must not be used for them).
TEST(CudaSample, MatchesCpuWithGrammarMasks) {
  SKIP_WITHOUT_GPU();
  compare(4, 22, 1000, 2.f, 0.0, DType::BF16, 0.5);
  compare(4, 22, 1003, 2.f, 0.0, DType::F32, 0.02);
  compare(3, 22, 151936, 3.f, 0.0, DType::BF16, 0.3);
  compare(3, 2, 151936, 3.f, 0.0, DType::BF16, 0.0001);  // rows 1, 2 masked, few rows
}

TEST(CudaSample, ManyCountersOfOneRowMatchCpu) {
  SKIP_WITHOUT_GPU();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(77);
  const int V = 4096;
  auto logits = bf16_logits(rng, V, 1.f);
  std::set<int32_t> distinct;
  for (int kind : {1, 3, 4, 6}) {
    for (uint64_t c = 0; c < 64; c++) {
      SampleRow r = menu_row(rng, kind, V);
      r.counter = c;
      r.seed = 5;
      r.top_logprobs = -1;
      int32_t want = run(*cpu, logits, 1, V, DType::F32, {r})[0].token;
      EXPECT_EQ(run(*gpu, logits, 1, V, DType::BF16, {r})[0].token, want)
          << "menu " << kind << " counter " << c;
      distinct.insert(want);
    }
  }
  EXPECT_GT(distinct.size(), 20u);  // the draws do vary with the counter
}

// The two halves (sample_async, then sample_wait) give what sample() gives, and the picked
// ids reach a later op's input on the device (feed_tokens) before the host has them; the
// CPU twin (Backend's defaults) feeds the same tokens.
TEST(CudaSample, AsyncHalvesFeedTheNextStepsTokensOnTheDevice) {
  SKIP_WITHOUT_GPU();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(77);
  const int64_t S = 6, V = 500;
  auto logits = bf16_logits(rng, size_t(S * V), 2.f);
  std::vector<SampleRow> rows;
  for (int s = 0; s < S; s++) rows.push_back(menu_row(rng, s, int(V)));
  const auto expected = run(*cpu, logits, S, V, DType::F32, rows);
  const std::vector<int32_t> dst = {7, 0, 3, 5}, src = {5, 1, 2, 1};
  for (Backend* be : {static_cast<Backend*>(gpu.get()), static_cast<Backend*>(cpu.get())}) {
    SCOPED_TRACE(be->name());
    Tensor host = Tensor::borrow(logits.data(), DType::F32, {S, V});
    Tensor t = be->upload(host, be->act_dtype());
    PendingSample pending = be->sample_async(t, rows);
    std::vector<int32_t> init(9, -7);
    Tensor tokens = be->upload(Tensor::borrow(init.data(), DType::I32, {9}), DType::I32);
    be->feed_tokens(tokens, dst, src, pending);
    EXPECT_THROW(be->feed_tokens(tokens, std::vector<int32_t>{9}, std::vector<int32_t>{0}, pending), std::exception);  // past tokens
    EXPECT_THROW(be->feed_tokens(tokens, std::vector<int32_t>{0}, std::vector<int32_t>{int32_t(S)}, pending), std::exception);
    std::vector<SampledToken> picked(static_cast<size_t>(S));
    be->sample_wait(pending, picked);
    Tensor back = be->to_host_f32(tokens);
    std::vector<int32_t> want = init;
    for (size_t i = 0; i < dst.size(); i++) want[size_t(dst[i])] = expected[size_t(src[i])].token;
    for (int64_t i = 0; i < 9; i++) EXPECT_EQ(int32_t(back.ptr<float>()[i]), want[size_t(i)]) << i;
    for (int64_t s = 0; s < S; s++) EXPECT_EQ(picked[size_t(s)].token, expected[size_t(s)].token);
    // Once waited for, the op's results are gone: feeding from it is an error.
    EXPECT_THROW(be->feed_tokens(tokens, dst, src, pending), std::exception);
  }
}

TEST(CudaSample, RejectsMalformedRows) {
  SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  std::vector<float> logits(64, 0.f);
  SampleRow r;
  r.top_logprobs = 21;
  EXPECT_THROW(run(*gpu, logits, 1, 64, DType::BF16, {r}), std::exception);
  SampleRow twice;
  twice.penalty_tokens = {3, 3};
  twice.output_counts = {1, 1};
  EXPECT_THROW(run(*gpu, logits, 1, 64, DType::BF16, {twice}), std::exception);
}

// Speculative decoding's acceptance test (step 5), against the CPU twin: rows of the menu
// (greedy ones ignore the proposal; penalties apply to the target's logits only), a third
// of them masked, each checking a proposal the CPU op drew from its own row of the draft
// logits q (f32 on both backends; the target's in bf16 on the GPU). Accepted proposals and
// residual draws alike must match.
void compare_drafts(int rounds, int S, int V, float scale) {
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(uint32_t(V) + uint32_t(S));
  int accepted = 0, sampled = 0;
  for (int round = 0; round < rounds; round++) {
    SCOPED_TRACE(testing::Message() << "V " << V << " round " << round);
    const std::vector<float> logits = bf16_logits(rng, size_t(S) * size_t(V), scale);
    const std::vector<float> q = bf16_logits(rng, size_t(S) * size_t(V), scale);
    std::vector<SampleRow> rows, draws;
    for (int s = 0; s < S; s++) {
      rows.push_back(menu_row(rng, s + round, V));
      SampleRow d;  // the draft's draw: the row's truncation, its own stream
      d.temperature = rows.back().temperature;
      d.top_k = rows.back().top_k;
      d.top_p = rows.back().top_p;
      d.min_p = rows.back().min_p;
      d.seed = rows.back().seed ^ 0x5bd1e995u;
      d.counter = rows.back().counter;
      draws.push_back(d);
    }
    std::vector<float> q_copy = q;  // the CPU op may work in place
    Tensor q_host = Tensor::borrow(q_copy.data(), DType::F32, {S, V});
    std::vector<SampledToken> proposals(static_cast<size_t>(S));
    cpu->sample(q_host, draws, proposals);
    std::vector<std::vector<uint32_t>> masks(static_cast<size_t>(S));
    for (int s = 0; s < S; s++) {
      SampleRow& r = rows[size_t(s)];
      r.draft = DraftCheck{proposals[size_t(s)].token, s};
      if (s % 3 == 1) {
        masks[size_t(s)] = random_mask(rng, V, 0.5, r.draft->token);
        r.allowed = masks[size_t(s)];
      }
    }
    auto run_with_q = [&](Backend& be, DType dtype) {
      std::vector<float> l = logits, qq = q;
      Tensor t = be.upload(Tensor::borrow(l.data(), DType::F32, {S, V}), dtype);
      Tensor qt = be.upload(Tensor::borrow(qq.data(), DType::F32, {S, V}), DType::F32);
      std::vector<SampledToken> out(static_cast<size_t>(S));
      be.sample(t, rows, out, &qt);
      return out;
    };
    const auto want = run_with_q(*cpu, DType::F32);
    const auto got = run_with_q(*gpu, DType::BF16);
    expect_same(got, want, rows);
    for (int s = 0; s < S; s++) {
      if (rows[size_t(s)].temperature <= 0.f) continue;
      sampled++;
      accepted += want[size_t(s)].token == rows[size_t(s)].draft->token;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, sampled);  // both the acceptance and the residual draw ran
}

TEST(CudaSample, DraftChecksMatchCpuOnASmallVocabulary) {
  SKIP_WITHOUT_GPU();
  compare_drafts(8, 33, 512, 1.f);
}

TEST(CudaSample, DraftChecksMatchCpuOnAQwenSizedVocabulary) {
  SKIP_WITHOUT_GPU();
  compare_drafts(2, 22, 151936, 2.f);
}

}  // namespace cuda_sample_test
}  // namespace tandem
