// bench_stats: percentiles against hand-computed values (numpy's linear interpolation),
// TPOT and ITL of one record, and a run summary.
#include <gtest/gtest.h>

#include "cli/bench/bench_stats.h"

namespace tandem::cli::bench {
namespace bench_stats_test {

TEST(BenchPercentile, LinearInterpolationBetweenClosestRanks) {
  // rank = p/100 × (n − 1): p50 of 4 values sits halfway between the 2nd and 3rd.
  std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(*percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(*percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(*percentile(v, 90), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(*percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(*percentile(v, 100), 4.0);
  std::vector<double> w = {10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(*percentile(w, 50), 30.0);  // rank 2: an exact element
  EXPECT_DOUBLE_EQ(*percentile(w, 90), 46.0);  // rank 3.6
  EXPECT_DOUBLE_EQ(*percentile(w, 25), 20.0);  // rank 1
}

TEST(BenchPercentile, OneValueAndNone) {
  EXPECT_DOUBLE_EQ(*percentile({7.5}, 0), 7.5);
  EXPECT_DOUBLE_EQ(*percentile({7.5}, 99), 7.5);
  EXPECT_FALSE(percentile({}, 50).has_value());
}

TEST(BenchStats, TpotAndItlOfOneRequest) {
  RequestRecord r;
  r.ok = true;
  r.num_output_tokens = 5;
  r.ttft_s = 0.2;
  r.e2e_s = 1.0;
  r.arrivals_s = {0.2, 0.3, 0.5, 0.8, 1.0};
  ASSERT_TRUE(time_per_output_token(r).has_value());
  EXPECT_NEAR(*time_per_output_token(r), 0.2, 1e-12);  // (1.0 − 0.2) / 4
  std::vector<double> itl = inter_token_latencies(r);
  ASSERT_EQ(itl.size(), 4u);
  EXPECT_NEAR(itl[0], 0.1, 1e-12);
  EXPECT_NEAR(itl[1], 0.2, 1e-12);
  EXPECT_NEAR(itl[2], 0.3, 1e-12);
  EXPECT_NEAR(itl[3], 0.2, 1e-12);
  r.num_output_tokens = 1;
  EXPECT_FALSE(time_per_output_token(r).has_value());  // no decode step to time
}

TEST(BenchStats, SummaryCountsOnlySuccessfulRequests) {
  RequestRecord a, b, failed;
  a.ok = b.ok = true;
  a.num_prompt_tokens = b.num_prompt_tokens = failed.num_prompt_tokens = 8;
  a.num_output_tokens = 3;
  a.ttft_s = 0.1;
  a.e2e_s = 0.5;
  a.arrivals_s = {0.1, 0.3, 0.5};
  b.num_output_tokens = 5;
  b.ttft_s = 0.3;
  b.e2e_s = 1.1;
  b.arrivals_s = {0.3, 0.5, 0.7, 0.9, 1.1};
  failed.error = "HTTP 500: boom";
  failed.e2e_s = 9;
  RunSummary s = summarize({a, b, failed}, 2, std::nullopt, 2.0);
  EXPECT_EQ(s.concurrency, 2);
  EXPECT_EQ(s.num_requests, 3);
  EXPECT_EQ(s.num_errors, 1);
  EXPECT_EQ(s.total_output_tokens, 8);
  EXPECT_EQ(s.total_prompt_tokens, 16);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 1.0);       // 2 ok / 2 s
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 4.0);  // 8 tokens / 2 s
  ASSERT_EQ(s.ttft.count, 2u);
  EXPECT_NEAR(*s.ttft.p50, 200.0, 1e-9);  // ms, halfway between 100 and 300
  EXPECT_NEAR(*s.ttft.mean, 200.0, 1e-9);
  // TPOT: a = 0.4/2 = 0.2 s, b = 0.8/4 = 0.2 s.
  EXPECT_NEAR(*s.tpot.p99, 200.0, 1e-9);
  // ITL pooled: a {0.2, 0.2}, b {0.2 × 4}: six gaps of 200 ms.
  EXPECT_EQ(s.itl.count, 6u);
  EXPECT_NEAR(*s.itl.p99, 200.0, 1e-9);
  EXPECT_NEAR(*s.e2e.p50, 800.0, 1e-9);  // the failed request's 9 s is not in it
}

TEST(BenchStats, EmptyRunHasNoPercentiles) {
  RunSummary s = summarize({}, 4, 2.0, 0.0);
  EXPECT_EQ(s.num_requests, 0);
  EXPECT_EQ(s.requests_per_s, 0.0);
  EXPECT_FALSE(s.ttft.p50.has_value());
  EXPECT_EQ(*s.request_rate, 2.0);
}

}  // namespace bench_stats_test
}  // namespace tandem::cli::bench
