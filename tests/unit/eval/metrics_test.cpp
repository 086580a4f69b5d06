// The metrics against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/metrics.h"

namespace tandem::eval {
namespace metrics_test {

TEST(Metrics, MeanStderrOfZeroOneScores) {
  // 3 of 4 right: p = 0.75, sample variance 0.25 (= 4·p(1−p)/3), stderr √(0.25/4) = 0.25.
  std::vector<double> xs = {1, 0, 1, 1};
  Estimate e = mean_with_stderr(xs);
  EXPECT_DOUBLE_EQ(e.value, 0.75);
  ASSERT_TRUE(e.std_error.has_value());
  EXPECT_NEAR(*e.std_error, 0.25, 1e-12);
  EXPECT_NEAR(*e.std_error, std::sqrt(0.75 * 0.25 / 3), 1e-12);  // √(p(1−p)/(n−1))
}

TEST(Metrics, MeanStderrOfRealValues) {
  // Σ(x − 5)² = 32 → sample sd √(32/7), stderr √(32/7)/√8 = √(4/7).
  std::vector<double> xs = {2, 4, 4, 4, 5, 5, 7, 9};
  Estimate e = mean_with_stderr(xs);
  EXPECT_DOUBLE_EQ(e.value, 5);
  EXPECT_NEAR(*e.std_error, std::sqrt(4.0 / 7.0), 1e-12);
}

TEST(Metrics, OneItemHasNoStderr) {
  std::vector<double> xs = {1};
  Estimate e = mean_with_stderr(xs);
  EXPECT_DOUBLE_EQ(e.value, 1);
  EXPECT_FALSE(e.std_error.has_value());
}

TEST(Metrics, NllOverWindowsIsARatioWithWindowStderr) {
  // m = 19/8 = 2.375; residuals S − m·N: 0.5, 1.25, −1.75 → squares 4.875;
  // se = √(3/2 · 4.875) / 8.
  std::vector<WindowNll> ws = {{10, 4}, {6, 2}, {3, 2}};
  Estimate nll = mean_nll_over_windows(ws);
  EXPECT_DOUBLE_EQ(nll.value, 2.375);
  EXPECT_NEAR(*nll.std_error, std::sqrt(1.5 * 4.875) / 8, 1e-12);
  Estimate ppl = perplexity_of(nll);
  EXPECT_NEAR(ppl.value, std::exp(2.375), 1e-12);
  EXPECT_NEAR(*ppl.std_error, std::exp(2.375) * std::sqrt(1.5 * 4.875) / 8, 1e-12);
}

TEST(Metrics, EqualWindowsOfEqualMeanHaveZeroStderr) {
  std::vector<WindowNll> ws = {{6, 3}, {4, 2}};
  Estimate nll = mean_nll_over_windows(ws);
  EXPECT_DOUBLE_EQ(nll.value, 2);
  EXPECT_DOUBLE_EQ(*nll.std_error, 0);
  std::vector<WindowNll> one = {{6, 3}};
  EXPECT_FALSE(mean_nll_over_windows(one).std_error.has_value());
}

TEST(Metrics, ArgmaxTakesTheFirstOfTies) {
  std::vector<double> v = {-3, -1, -1, -2};
  EXPECT_EQ(argmax_first(v), 1u);
  std::vector<double> w = {-5};
  EXPECT_EQ(argmax_first(w), 0u);
}

TEST(Metrics, NormalizeForMatchOnlyTouchesWhitespace) {
  EXPECT_EQ(normalize_for_match("  the  earth.\n"), "the earth.");
  EXPECT_EQ(normalize_for_match("a\t\r\nb"), "a b");
  EXPECT_EQ(normalize_for_match(" \n "), "");
  EXPECT_NE(normalize_for_match("Earth."), normalize_for_match("earth."));
  EXPECT_NE(normalize_for_match("earth"), normalize_for_match("earth."));
}

}  // namespace metrics_test
}  // namespace tandem::eval
