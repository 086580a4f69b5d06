// The parts of speculative decoding that need no model: --speculative-config parsing (every
// error names its field), the n-gram proposer (what followed the latest earlier occurrence
// of the longest suffix, a repeating pattern continued), the step cost model and the
// controller that speculates (and reads a step in flight early) only where the measured
// costs, the rows' acceptance and how often they have proposals say it pays.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/ngram_index.h"
#include "engine/spec_controller.h"
#include "engine/speculative_config.h"
#include "engine/speculator.h"
#include "engine/step_cost_model.h"
#include "engine_test_util.h"

namespace tandem {
namespace spec_parts_test {

TEST(SpeculativeConfig, ParsesVllmSpellings) {
  SpeculativeConfig c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2})");
  EXPECT_EQ(c.method, SpecMethod::Ngram);
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_TRUE(c.adaptive);
  c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 3);  // vLLM: the one given stands for both
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = parse_speculative_config(
      R"({"model": "/m/draft", "num_speculative_tokens": 5, "adaptive": false})");
  EXPECT_EQ(c.method, SpecMethod::DraftModel);
  EXPECT_EQ(c.model, "/m/draft");
  EXPECT_FALSE(c.adaptive);
  EXPECT_EQ(speculative_summary(c), "draft_model, K = 5, draft /m/draft, fixed");
}

TEST(SpeculativeConfig, ErrorsNameTheField) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"[1]", "JSON object"},
      {"{", "not JSON"},
      {R"({"method": "ngram"})", "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": 99})", "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": "4"})", "num_speculative_tokens"},
      {R"({"method": "eagle", "num_speculative_tokens": 4})", "method"},
      {R"({"num_speculative_tokens": 4})", "method"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2})",
       "prompt_lookup_min"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 0})",
       "prompt_lookup_max"},
      {R"({"method": "draft_model", "num_speculative_tokens": 2})", "model"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1})",
       "draft_tensor_parallel_size"},
      {R"({"model": "d", "num_speculative_tokens": 2, "adaptive": 1})", "adaptive"},
  };
  for (auto [text, field] : bad) {
    try {
      parse_speculative_config(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("--speculative-config"), std::string::npos) << e.what();
    }
  }
}

TEST(NgramIndex, ProposesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  NgramIndex index(1, 3);
  //                               0  1  2  3  4  5  6  7  8  9
  std::vector<int32_t> t = {5, 6, 7, 8, 1, 6, 7, 9, 2, 6};
  // Suffix [6]: its latest earlier occurrence is at 5, followed by 7 9 2 6.
  EXPECT_EQ(index.propose(t, 3), (std::vector<int32_t>{7, 9, 2}));
  t.push_back(7);  // suffix [6 7] (longer) last at 5..6, followed by 9 2 6 7
  EXPECT_EQ(index.propose(t, 2), (std::vector<int32_t>{9, 2}));
  t.push_back(8);  // [6 7 8] occurred at 1..3: the longest suffix wins over [7 8] / [8]
  EXPECT_EQ(index.propose(t, 4), (std::vector<int32_t>{1, 6, 7, 9}));
  // A sequence of its own (an index only grows with its row): no earlier occurrence.
  EXPECT_TRUE(NgramIndex(1, 3).propose(std::vector<int32_t>{1, 2, 3}, 4).empty());
  EXPECT_TRUE(NgramIndex(1, 3).propose(t, 0).empty());
}

TEST(NgramIndex, ARepeatingPatternContinuesWithItsPeriod) {
  NgramIndex index(2, 2);
  const std::vector<int32_t> t = {4, 1, 2, 3, 1, 2, 3, 1, 2};
  // [1 2] last occurred at 4..5 (period 3): 3, then the proposal itself goes on.
  EXPECT_EQ(index.propose(t, 7), (std::vector<int32_t>{3, 1, 2, 3, 1, 2, 3}));
  NgramIndex run(1, 2);
  EXPECT_EQ(run.propose(std::vector<int32_t>{9, 9, 9}, 3), (std::vector<int32_t>{9, 9, 9}));
}

TEST(NgramIndex, MinimumLengthAndManyTokens) {
  NgramIndex index(3, 4);
  EXPECT_EQ(index.propose(std::vector<int32_t>{1, 2, 3, 1, 2, 3}, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(
      NgramIndex(3, 4).propose(std::vector<int32_t>{1, 2, 5, 2}, 2).empty());  // only [2] repeats
  // A long context grows the tables; lookups stay exact.
  std::vector<int32_t> t;
  for (int i = 0; i < 20000; i++) t.push_back(int32_t((i * 7919) % 1009));
  t.push_back(t[100]);
  t.push_back(t[101]);
  t.push_back(t[102]);
  NgramIndex big(3, 3);
  EXPECT_EQ(big.propose(t, 2), (std::vector<int32_t>{t[103], t[104]}));
}

TEST(StepCostModel, InterpolatesMeasuredBuckets) {
  StepCostModel m;
  EXPECT_FALSE(m.cost(8));
  m.observe(1, 0.500);  // a bucket's first step is a warm-up: not a measurement yet ...
  EXPECT_FALSE(m.cost(1));
  m.observe(1, 0.010);                   // ... the second replaces it
  EXPECT_DOUBLE_EQ(*m.cost(64), 0.010);  // beyond the largest measured: its cost
  m.observe(64, 0.074);
  m.observe(64, 0.074);
  EXPECT_NEAR(*m.cost(32), 0.010 + 31.0 / 63.0 * 0.064, 1e-12);
  EXPECT_DOUBLE_EQ(*m.cost(1), 0.010);
  m.observe(1, 0.020);  // then a bucket follows its new measurements
  EXPECT_NEAR(*m.cost(1), 0.012, 1e-12);
  EXPECT_EQ(m.samples(1), 3);
}

// cost() looks only at the measured buckets nearest n's own; a scan of every bucket (what it
// replaced) must give the same answer for every size, whichever buckets are measured.
TEST(StepCostModel, NearestBucketsGiveWhatAScanOfAllGives) {
  const auto scan = [](const std::vector<std::pair<double, double>>& measured, int n) {
    std::optional<std::pair<double, double>> below, above;  // (tokens, seconds)
    for (const auto& b : measured) {
      if (b.first <= n) {
        if (!below || b.first > below->first) below = b;
      } else if (!above || b.first < above->first) {
        above = b;
      }
    }
    if (!below && !above) return std::optional<double>();
    if (!above) return std::optional<double>(below->second);
    if (!below) return std::optional<double>(above->second);
    const double t = (n - below->first) / (above->first - below->first);
    return std::optional<double>(below->second + t * (above->second - below->second));
  };
  uint64_t x = 12345;
  const auto next = [&x](uint64_t range) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % range;
  };
  for (int trial = 0; trial < 200; trial++) {
    StepCostModel m;
    for (int steps = int(next(40)); steps > 0; steps--) {
      const int n = 1 + int(next(uint64_t(1) << next(14)));
      m.observe(n, 1e-3 * double(1 + next(1000)));
    }
    // The measured buckets, read back through cost() at each bucket's own average.
    std::vector<std::pair<double, double>> measured;
    for (int b = 0; b < StepCostModel::kBuckets; b++) {
      const int lo = b == 0 ? 1 : (1 << (b - 1)) + 1;
      if (m.samples(lo) < 2) continue;
      const std::optional<StepCostModel::Point> p = m.largest_below(double(1 << b) + 0.5);
      ASSERT_TRUE(p);
      measured.emplace_back(p->tokens, p->seconds);
    }
    for (int n = 0; n <= 20000; n += 1 + int(next(97))) {
      const std::optional<double> want = scan(measured, n), got = m.cost(n);
      ASSERT_EQ(want.has_value(), got.has_value()) << "n = " << n;
      if (want) {
        EXPECT_NEAR(*got, *want, 1e-12) << "n = " << n << ", trial " << trial;
      }
    }
  }
}

// A step of n tokens costs `base + per_token · n`, whatever its kind.
void teach(SpecController& c, double base, double per_token) {
  for (int n : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024})
    for (StepKind kind : {StepKind::Speculative, StepKind::Synchronous, StepKind::Overlapped})
      for (int twice = 0; twice < 2; twice++) c.observe_step(kind, n, base + per_token * n);
}

// Twice each (a cost bucket counts from its second step): plain steps of `rows` tokens,
// overlapped and synchronous, and speculative steps of `spec_tokens`.
void teach_steps(SpecController& c, int rows, double overlapped, double synchronous,
                 int spec_tokens, double speculative) {
  for (int twice = 0; twice < 2; twice++) {
    c.observe_step(StepKind::Overlapped, rows, overlapped);
    c.observe_step(StepKind::Synchronous, rows, synchronous);
    c.observe_step(StepKind::Speculative, spec_tokens, speculative);
  }
}

TEST(SpecController, SpeculatesWhereVerifyingIsCheapAndAcceptanceHigh) {
  SpecController c(/*adaptive=*/true);
  const std::vector<SpecCandidate> one = {{4, 0.8}};
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{0});  // nothing measured: a plain step first
  teach(c, 0.010, 0.00001);                             // memory-bound: tokens nearly free
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{4});
  EXPECT_EQ(c.choose(std::vector<SpecCandidate>{{4, 0.0}}, 1, 1),
            std::vector<int>{0});  // never accepted
  // Compute-bound: each token costs as much as the rest of the step; only a sure thing pays.
  SpecController busy(true);
  teach(busy, 0.0, 0.001);
  std::vector<SpecCandidate> many(256, SpecCandidate{4, 0.6});
  std::vector<int> k = busy.choose(many, 256, 256);
  for (int x : k) EXPECT_EQ(x, 0);
  EXPECT_FALSE(busy.may_speculate(many, 256, 256));
}

TEST(SpecController, AfterManySpeculativeStepsOnePlainStepMeasuresAgain) {
  SpecController c(true);
  teach(c, 0.010, 0.00001);
  const std::vector<SpecCandidate> one = {{4, 0.8}};
  for (int i = 0; i < SpecController::kPlainRefresh; i++) {
    ASSERT_EQ(c.choose(one, 1, 1), std::vector<int>{4}) << "step " << i;
    c.observe_step(StepKind::Speculative, 5, 0.010);
  }
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{0});
  c.observe_step(StepKind::Synchronous, 1, 0.010);
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{4});
}

TEST(SpecController, AWarmUpStepDoesNotStopSpeculationASecondMeasurementDoes) {
  SpecController c(true);
  for (int i = 0; i < 2; i++)
    c.observe_step(StepKind::Synchronous, 1, 0.010);  // plain decode steps
  const std::vector<SpecCandidate> one = {{4, 0.8}};
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{4});  // a verify step never measured: tried
  c.observe_step(StepKind::Speculative, 5, 1.0);        // its first run captured a CUDA graph, say
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{4});  // a warm-up: tried again
  c.observe_step(StepKind::Speculative, 5, 1.0);        // and again as dear: now it is
  EXPECT_EQ(c.choose(one, 1, 1), std::vector<int>{0});
  SpecController cheap(true);
  for (int i = 0; i < 2; i++) cheap.observe_step(StepKind::Synchronous, 1, 0.010);
  cheap.observe_step(StepKind::Speculative, 5, 1.0);
  cheap.observe_step(StepKind::Speculative, 5, 0.011);  // the second replaces the warm-up
  EXPECT_EQ(cheap.choose(one, 1, 1), std::vector<int>{4});
}

TEST(SpecController, AcceptanceFollowsTheRowAndForgetsIdleRows) {
  SpecController c(true);
  SpecState row;
  c.observe_row(row, 4, 4);  // 4 reached, all accepted
  ASSERT_TRUE(row.acceptance);
  EXPECT_GT(*row.acceptance, 0.5);
  const double high = *row.acceptance;
  c.observe_row(row, 4, 0);  // the first rejected: one position reached
  EXPECT_LT(*row.acceptance, high);
  for (int i = 0; i < SpecController::kForgetSteps; i++) c.observe_idle(row);
  EXPECT_FALSE(row.acceptance);
  EXPECT_DOUBLE_EQ(expected_accepted(0.5, 3), 0.5 + 0.25 + 0.125);
  SpecController fixed(false);  // not adaptive: every proposal, every step
  teach(fixed, 0.0, 0.001);
  EXPECT_EQ(fixed.choose(std::vector<SpecCandidate>{{3, 0.0}, {0, 0.9}}, 2, 2),
            (std::vector<int>{3, 0}));
}

// The costs of an H100 serving an 8B-shaped llama at 64 rows (offline_bench, 2026-12-06):
// an overlapped plain decode step 7.62 ms, one planned after reading the step before it
// 7.80 ms, a step verifying a few proposals 8.0 ms.
void teach_h100_64_rows(SpecController& c) { teach_steps(c, 64, 7.62e-3, 7.80e-3, 68, 8.0e-3); }

TEST(SpecController, AtSixtyFourRowsThatRarelyProposeTheStepIsNotReadEarly) {
  SpecController c(true);
  teach_h100_64_rows(c);
  // Each row would verify 4 proposals at α = 0.6 — if it had them; it has them 2% of the
  // steps: ~1.7 expected tokens a step, less than the 2.4% the overlap is worth.
  const std::vector<SpecCandidate> rare(64, SpecCandidate{4, 0.6, 0.02});
  EXPECT_FALSE(c.may_speculate(rare, 64, 64));
  // Rows that always have proposals are worth it (what every row was assumed to have).
  const std::vector<SpecCandidate> always(64, SpecCandidate{4, 0.6, 1.0});
  EXPECT_TRUE(c.may_speculate(always, 64, 64));
  // A probe: after kProbeInterval noes in a row one yes, so the rates are seen again; a
  // probe that changed nothing makes the next wait twice as long, a real yes resets it.
  auto noes_before_a_probe = [&] {
    int noes = 0;
    while (!c.may_speculate(rare, 64, 64) && noes < 1000) noes++;
    return noes;
  };
  EXPECT_EQ(noes_before_a_probe(), SpecController::kProbeInterval - 1);
  EXPECT_EQ(noes_before_a_probe(), 2 * SpecController::kProbeInterval - 1);
  EXPECT_EQ(noes_before_a_probe(), 4 * SpecController::kProbeInterval - 1);
  ASSERT_TRUE(c.may_speculate(always, 64, 64));
  EXPECT_EQ(noes_before_a_probe(), SpecController::kProbeInterval - 1);
  // Nothing measured overlapped yet: no early read (an overlapped step measures it first).
  SpecController fresh(true);
  fresh.observe_step(StepKind::Synchronous, 64, 7.80e-3);
  fresh.observe_step(StepKind::Synchronous, 64, 7.80e-3);
  EXPECT_FALSE(fresh.may_speculate(always, 64, 64));
}

// At 256 rows half of which are expected to propose, may_speculate weighs a step of up to
// 256 + 4 · 128 query tokens; only steps of ~376 were measured. Held flat, their cost made
// the largest step look worth an early read (463 expected tokens in 20 ms against 256 in
// 11.4), and choose, seeing the rows' real proposals, then declined — 133 of 138 early reads
// on an H100 (2026-12-06). Along the line from the plain step's 11.8 ms at 256 tokens, the
// larger steps cost what they would.
TEST(SpecController, PastTheLargestMeasuredVerifyStepTheEarlyReadExtrapolatesItsCost) {
  auto taught = [](double verify_seconds) {
    SpecController c(true);
    teach_steps(c, 256, 11.4e-3, 11.8e-3, 376, verify_seconds);
    return c;
  };
  const std::vector<SpecCandidate> half(256, SpecCandidate{4, 0.67, 0.5});
  SpecController dear = taught(20e-3);
  EXPECT_FALSE(dear.may_speculate(half, 256, 256));
  // choose still costs a larger step than any measured as the largest (tried once, then
  // known): every row with 4 proposals makes a step of 1280 query tokens.
  const std::vector<SpecCandidate> all(256, SpecCandidate{4, 0.95});
  const std::vector<int> k = dear.choose(all, 256, 256);
  EXPECT_EQ(std::count(k.begin(), k.end(), 4), 256);
  // A verify step that costs little more than a plain one is worth reading early for.
  SpecController cheap = taught(13e-3);
  EXPECT_TRUE(cheap.may_speculate(half, 256, 256));
}

// At 256 rows on text that rarely repeats, the expected proposals made reading early look
// worth it step after step, and choose, seeing the real ones, declined: 639 of 644 early
// reads on an H100 (2026-12-07) lost the overlap for nothing, 3% of throughput. What the
// reads gave stops them; probes still read now and then; other batch sizes keep their own.
TEST(SpecController, EarlyReadsThatSpeculateNothingStopAndProbesStillRead) {
  SpecController c(true);
  teach_steps(c, 256, 10.96e-3, 11.5e-3, 376, 12.0e-3);
  teach_steps(c, 1, 4.0e-3, 4.1e-3, 5, 4.3e-3);
  const std::vector<SpecCandidate> half(256, SpecCandidate{4, 0.67, 0.5});
  const std::vector<SpecCandidate> one = {{4, 0.8, 0.9}};
  c.observe_read(true);  // no read awaits its outcome: nothing moves
  EXPECT_DOUBLE_EQ(c.read_yield(256), 1.0);
  ASSERT_TRUE(c.may_speculate(half, 256, 256));  // nothing read yet: the expectation alone
  c.observe_read(false);
  int reads = 1, late_reads = 0;
  for (int i = 0; i < 1000; i++) {
    if (!c.may_speculate(half, 256, 256)) continue;
    c.observe_read(false);  // the step planned after it speculated nothing
    reads++;
    if (i >= 500) late_reads++;
  }
  EXPECT_LT(c.read_yield(256), 0.2);
  // A handful of reads until the yield fell, then the probes (at 32, 64, 128, 256 noes).
  EXPECT_GE(reads, 4);
  EXPECT_LE(reads, 20);
  EXPECT_GE(late_reads, 1);
  EXPECT_LE(late_reads, 2);
  // Batch 1 keeps its own yield: its reads speculate, and go on.
  EXPECT_DOUBLE_EQ(c.read_yield(1), 1.0);
  for (int i = 0; i < 100; i++) {
    ASSERT_TRUE(c.may_speculate(one, 1, 1)) << "step " << i;
    c.observe_read(true);
    c.observe_step(StepKind::Speculative, 5, 4.3e-3);
    c.observe_step(StepKind::Overlapped, 1, 4.0e-3);  // as the refresh would measure it
  }
  EXPECT_DOUBLE_EQ(c.read_yield(1), 1.0);
}

// Engine::step's order at 256 rows whose reads speculate nothing: may_speculate; after a
// read choose declines and the step planned is synchronous, else it is overlapped. Then one
// overlapped step costs 100 ms (a decode graph captured mid-run, say): overlapped steps,
// which alone measure that cost, come once in kPlainRefresh while the step is read early, so
// the overlapped cost stayed above the synchronous one, (1 − y) · the synchronous rate beat
// it whatever y, and the reads went on — 521 of about 750 steps on an H100. An overlapped
// cost above the synchronous one is measured again first.
TEST(SpecController, AnOverlappedCostAboveTheSynchronousOneIsMeasuredBeforeReadingEarly) {
  SpecController c(true);
  teach_steps(c, 256, 10.96e-3, 11.5e-3, 376, 12.0e-3);
  const std::vector<SpecCandidate> half(256, SpecCandidate{4, 0.67, 0.5});
  auto run = [&](int steps) {
    int reads = 0;
    for (int i = 0; i < steps; i++) {
      if (c.may_speculate(half, 256, 256)) {
        reads++;
        c.observe_read(false);
        c.observe_step(StepKind::Synchronous, 256, 11.5e-3);
      } else {
        c.observe_step(StepKind::Overlapped, 256, 10.96e-3);
      }
    }
    return reads;
  };
  EXPECT_LE(run(250), 20);  // the yield stops the reads
  c.observe_step(StepKind::Overlapped, 192, 0.1);
  EXPECT_GT(*c.cost(StepKind::Overlapped, 256), *c.cost(StepKind::Synchronous, 256));
  const int reads = run(500);
  EXPECT_LE(reads, 20) << "the early reads never stopped";
  EXPECT_LT(*c.cost(StepKind::Overlapped, 256), *c.cost(StepKind::Synchronous, 256));
  // Where the costs agree, the stale check does not get in the way: the refresh's own
  // overlapped steps aside, batch 1 reads every step (AtBatchOneWithHighAcceptance...).
  SpecController one(true);
  teach_steps(one, 1, 4.0e-3, 4.1e-3, 5, 4.3e-3);
  for (int i = 0; i < 50; i++) {
    ASSERT_TRUE(one.may_speculate(std::vector<SpecCandidate>{{4, 0.8, 0.9}}, 1, 1)) << i;
    one.observe_read(true);
    one.observe_step(StepKind::Speculative, 5, 4.3e-3);
  }
}

TEST(SpecController, AtBatchOneWithHighAcceptanceTheStepIsReadEarly) {
  SpecController c(true);
  teach_steps(c, 1, 4.0e-3, 4.1e-3, 5, 4.3e-3);
  EXPECT_TRUE(c.may_speculate(std::vector<SpecCandidate>{{4, 0.8, 0.9}}, 1, 1));
  EXPECT_EQ(c.choose(std::vector<SpecCandidate>{{4, 0.8}}, 1, 1), std::vector<int>{4});
  // Even a row that rarely proposes: a verify step costs little more than a decode step.
  EXPECT_TRUE(c.may_speculate(std::vector<SpecCandidate>{{4, 0.8, 0.1}}, 1, 1));
  // Never accepted: nothing to gain.
  EXPECT_FALSE(c.may_speculate(std::vector<SpecCandidate>{{4, 0.0, 0.9}}, 1, 1));
  // No row has room: no early read, and no probe counted toward one.
  for (int i = 0; i < 2 * SpecController::kProbeInterval; i++)
    ASSERT_FALSE(c.may_speculate(std::vector<SpecCandidate>{{0, 0.8, 0.9}}, 1, 1));
}

TEST(SpecController, ARowThatProposesOftenSpeculatesAtAModerateBatch) {
  SpecController c(true);
  teach_steps(c, 16, 5.0e-3, 5.15e-3, 20, 5.3e-3);
  std::vector<SpecCandidate> rows(16, SpecCandidate{4, 0.5, 0.01});
  EXPECT_FALSE(c.may_speculate(rows, 16, 16));
  rows[3] = {4, 0.9, 0.9};  // a row in a passage it repeats: proposes and is accepted
  EXPECT_TRUE(c.may_speculate(rows, 16, 16));
  // Read: only that row had proposals; it verifies all 4 (against a synchronous step).
  std::vector<SpecCandidate> had(16, SpecCandidate{0, 0.5});
  had[3] = {4, 0.9};
  std::vector<int> want(16, 0);
  want[3] = 4;
  EXPECT_EQ(c.choose(had, 16, 16), want);
}

TEST(SpecController, SynchronousPlainStepsDoNotChangeTheOverlappedCost) {
  SpecController c(true);
  teach_h100_64_rows(c);
  const std::vector<SpecCandidate> rare(64, SpecCandidate{4, 0.6, 0.02});
  ASSERT_FALSE(c.may_speculate(rare, 64, 64));
  // Steps planned after an early read (each one's planning on the device's time): they
  // would make a plain step look dearer (64 / 8.5 ms: the same rows would then pay).
  for (int i = 0; i < 20; i++) c.observe_step(StepKind::Synchronous, 64, 8.5e-3);
  EXPECT_DOUBLE_EQ(*c.cost(StepKind::Overlapped, 64), 7.62e-3);
  EXPECT_NEAR(*c.cost(StepKind::Synchronous, 64), 8.5e-3, 2e-5);  // an average converging
  EXPECT_FALSE(c.may_speculate(rare, 64, 64));
  // After the read, a plain step is a synchronous one: choose weighs against that cost.
  std::vector<SpecCandidate> had(64, SpecCandidate{0, 0.6});
  had[0] = {4, 0.9};
  EXPECT_GT(c.choose(had, 64, 64)[0], 0);
  EXPECT_EQ(c.choose(had, 64, 64, /*overlapped=*/true)[0], 0);  // still in flight: not worth it
}

TEST(SpecController, AfterManyStepsWithoutOverlapOneIsNotReadEarly) {
  SpecController c(true);
  teach(c, 0.010, 0.00001);
  const std::vector<SpecCandidate> one = {{4, 0.8, 0.9}};
  ASSERT_TRUE(c.may_speculate(one, 1, 1));
  for (int i = 0; i < SpecController::kPlainRefresh; i++)
    c.observe_step(StepKind::Speculative, 5, 0.010);
  // choose's plain refresh, at the taught cost (below the overlapped one it would be stale)
  c.observe_step(StepKind::Synchronous, 1, 0.01001);
  EXPECT_FALSE(c.may_speculate(one, 1, 1));  // this one's: an overlapped step
  EXPECT_TRUE(c.may_speculate(one, 1, 1));
  c.observe_step(StepKind::Overlapped, 1, 0.010);
  EXPECT_TRUE(c.may_speculate(one, 1, 1));
}

TEST(SpecController, ProposalRatesFollowTheRowFromTheServersStart) {
  SpecController c(true);
  SpecState quiet, busy;
  EXPECT_DOUBLE_EQ(c.proposal_rate(quiet), 0.5);  // nothing seen: the server's start
  for (int i = 0; i < 8; i++) {
    c.observe_proposals(quiet, false);
    c.observe_proposals(busy, true);
  }
  EXPECT_LT(c.proposal_rate(quiet), 0.06);
  EXPECT_GT(c.proposal_rate(busy), 0.94);
  // The server's rate moved as much up as down: a new row starts where it was.
  EXPECT_NEAR(c.proposal_rate(SpecState{}), 0.5, 0.01);
  for (int i = 0; i < 200; i++) c.observe_proposals(quiet, false);
  EXPECT_LT(c.proposal_rate(SpecState{}), 0.05);
  // Not adaptive: a row that may speculate reads the step early, whatever its rate.
  SpecController fixed(false);
  EXPECT_TRUE(fixed.may_speculate(std::vector<SpecCandidate>{{4, 0.0, 0.0}}, 64, 64));
}

// The speculator weighs each row by its own proposal rate: 64 rows whose n-gram index finds
// nothing stop reading the step in flight early after a few steps that showed it.
TEST(Speculator, RowsThatFindNoProposalsStopTheEarlyReads) {
  Speculator spec(test::ngram_config(4, 2, 4),
                  SpeculatorSetup{.vocab_size = 4096, .max_model_len = 1024});
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> running;
  for (int i = 0; i < 64; i++) {
    GenerationRequest r;
    for (int t = 0; t < 9; t++) r.prompt.push_back(int32_t(i * 16 + t));  // no token repeats
    r.max_tokens = 100;
    auto& seq = seqs.emplace_back(std::make_unique<Sequence>(i, r, nullptr, 1));
    seq->status = SeqStatus::Running;
    seq->tokens.push_back(int32_t(i * 16 + 9));  // one generated token, its K/V not computed
    seq->num_computed = 9;
    running.push_back(seq.get());
  }
  for (int twice = 0; twice < 2; twice++) {
    spec.observe_step(StepKind::Overlapped, 64, 7.62e-3);
    spec.observe_step(StepKind::Synchronous, 64, 7.80e-3);
    spec.observe_step(StepKind::Speculative, 68, 8.0e-3);
  }
  bool read = spec.may_speculate(running);
  EXPECT_TRUE(read);  // nothing seen yet: each row has proposals half the time, say
  int reads = 0;
  while (read && reads < 20) {
    reads++;
    spec.propose(running, /*overlapped=*/false);  // the step was read: nothing to propose
    for (const Sequence* seq : running) ASSERT_EQ(seq->spec.num_draft, 0);
    read = spec.may_speculate(running);
  }
  EXPECT_FALSE(read) << "the early reads never stopped";
  EXPECT_GE(reads, 1);
  EXPECT_LT(spec.controller().proposal_rate(running[0]->spec), 0.5);  // what the reads saw
  EXPECT_EQ(spec.stats().num_steps_read_early, reads);
  EXPECT_EQ(spec.stats().num_speculative_steps, 0);
}

// An n-gram row's index is brought up to its known tokens while the step in flight runs
// (may_speculate), so an early read does not build the index of a whole prompt while the
// device waits; what the row proposes after the read is what it proposed before.
TEST(Speculator, NgramIndexesAreUpdatedBeforeTheEarlyRead) {
  // Not adaptive: a row verifies all it has (no step costs are measured here).
  Speculator spec(test::ngram_config(3, 2, 3, /*adaptive=*/false),
                  SpeculatorSetup{.vocab_size = 4096, .max_model_len = 1024});
  GenerationRequest r;
  r.prompt = {7, 8, 9, 10, 11, 7, 8};  // "7 8" followed by 9 10 11 before
  r.max_tokens = 100;
  Sequence seq(0, r, nullptr, 1);
  seq.status = SeqStatus::Running;
  seq.num_computed = 7;
  seq.num_in_flight = 1;  // its next token is in flight
  std::vector<Sequence*> running{&seq};
  spec.may_speculate(running);
  ASSERT_TRUE(seq.spec.ngram);
  EXPECT_EQ(seq.spec.ngram->indexed(), 6);  // every n-gram with a known successor
  // The step is read: the row's token arrives and it proposes from the index.
  seq.num_in_flight = 0;
  seq.tokens.push_back(9);
  seq.num_computed = 7;
  spec.propose(running, /*overlapped=*/false);
  EXPECT_EQ(seq.spec.ngram->indexed(), 7);
  EXPECT_EQ(seq.spec.draft, (std::vector<int32_t>{10, 11, 7}));
}

}  // namespace spec_parts_test
}  // namespace tandem
