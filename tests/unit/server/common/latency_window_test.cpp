// LatencyWindow: percentiles within one bin (2.5%) of the exact nearest-rank ones, old
// seconds leaving the window, and the edges (nothing observed, values off either end).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "server/common/latency_window.h"

namespace tandem::server {
namespace latency_window_test {

using Clock = LatencyWindow::Clock;
using std::chrono::seconds;

double exact_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = size_t(std::ceil(q * double(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST(LatencyWindow, PercentilesMatchTheExactOnesWithinABin) {
  Clock::time_point t0 = Clock::now();
  LatencyWindow w(seconds(60), t0);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> latency(std::log(0.004), 1.0);  // ~4 ms, long tail
  std::vector<double> seen;
  for (int i = 0; i < 20000; i++) {
    double v = latency(rng);
    seen.push_back(v);
    w.observe(v, t0 + std::chrono::milliseconds(i * 2));  // spread over 40 s
  }
  LatencyWindow::Summary s = w.summary(t0 + seconds(40));
  EXPECT_EQ(s.count, 20000u);
  for (auto [q, got] : {std::pair{0.5, s.p50}, {0.9, s.p90}, {0.99, s.p99}}) {
    ASSERT_TRUE(got.has_value());
    double want = exact_quantile(seen, q);
    EXPECT_NEAR(*got / want, 1.0, 0.026) << "q=" << q << " want " << want << " got " << *got;
  }
}

TEST(LatencyWindow, OldSecondsLeaveTheWindow) {
  Clock::time_point t0 = Clock::now();
  LatencyWindow w(seconds(60), t0);
  for (int i = 0; i < 100; i++) w.observe(2.0, t0);
  w.observe(0.001, t0 + seconds(30));
  LatencyWindow::Summary mid = w.summary(t0 + seconds(59));
  EXPECT_EQ(mid.count, 101u);
  EXPECT_NEAR(*mid.p50, 2.0, 0.05);
  LatencyWindow::Summary later = w.summary(t0 + seconds(61));
  EXPECT_EQ(later.count, 1u);
  EXPECT_NEAR(*later.p99, 0.001, 0.001 * 0.026);
  // A slot reused 60 s later forgets what it held.
  w.observe(0.5, t0 + seconds(60));
  LatencyWindow::Summary reused = w.summary(t0 + seconds(60));
  EXPECT_EQ(reused.count, 2u);
  EXPECT_NEAR(*reused.p99, 0.5, 0.5 * 0.026);
}

TEST(LatencyWindow, EdgesAreClamped) {
  Clock::time_point t0 = Clock::now();
  LatencyWindow w(seconds(60), t0);
  LatencyWindow::Summary empty = w.summary(t0);
  EXPECT_EQ(empty.count, 0u);
  EXPECT_FALSE(empty.p50.has_value());
  w.observe(0.0, t0);
  w.observe(-1.0, t0);
  w.observe(std::nan(""), t0);
  w.observe(1e9, t0);
  LatencyWindow::Summary s = w.summary(t0);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(*s.p50, LatencyWindow::kMinSeconds);
  EXPECT_EQ(*s.p99, LatencyWindow::value_of(LatencyWindow::kNumBins - 1));
  EXPECT_GT(*s.p99, 1000.0);
}

TEST(LatencyWindow, BinsAreFivePercentWide) {
  for (double v : {2e-5, 1e-3, 0.0137, 0.25, 3.0, 600.0}) {
    int b = LatencyWindow::bin_of(v);
    EXPECT_NEAR(LatencyWindow::value_of(b) / v, 1.0, 0.026) << v;
  }
}

}  // namespace latency_window_test
}  // namespace tandem::server
