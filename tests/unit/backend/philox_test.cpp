// Philox4x32-10 against Random123's published known-answer vectors, and the structure of
// philox_uniform (range, independence of its inputs, first and second moments).
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <vector>

#include "backend/philox.h"

namespace tandem {
namespace philox_test {

void expect_block(Philox4x32 ctr, uint32_t k0, uint32_t k1, Philox4x32 want) {
  Philox4x32 got = philox4x32_10(ctr, k0, k1);
  for (int i = 0; i < 4; i++) EXPECT_EQ(got.v[i], want.v[i]) << "word " << i;
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  expect_block({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  expect_block({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
               {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  // The digits of pi (counter) and the next ones (key).
  expect_block({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
               {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST(Philox, UniformUsesBothHalvesOfEachBlock) {
  // index 2b and 2b+1 read words (0,1) and (2,3) of block b of draw `counter`.
  uint64_t seed = 0x0123456789abcdefull, counter = 77;
  Philox4x32 block = philox4x32_10({{77, 0, 5, 0}}, 0x89abcdefu, 0x01234567u);
  auto expect = [](uint32_t hi, uint32_t lo) {
    uint64_t bits = (uint64_t(hi) << 32 | lo) >> 12;
    return (double(bits) + 0.5) / 4503599627370496.0;
  };
  EXPECT_EQ(philox_uniform(seed, counter, 10), expect(block.v[0], block.v[1]));
  EXPECT_EQ(philox_uniform(seed, counter, 11), expect(block.v[2], block.v[3]));
}

TEST(Philox, UniformIsInTheOpenUnitIntervalAndDependsOnEveryInput) {
  double u = philox_uniform(1, 2, 3);
  EXPECT_NE(u, philox_uniform(2, 2, 3));
  EXPECT_NE(u, philox_uniform(1, 3, 3));
  EXPECT_NE(u, philox_uniform(1, 2, 4));
  EXPECT_NE(u, philox_uniform(1ull << 40, 2, 3));  // the key's high word matters
  EXPECT_NE(u, philox_uniform(1, 2 + (1ull << 40), 3));
  EXPECT_EQ(u, philox_uniform(1, 2, 3));
  std::vector<double> all;
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    double x = philox_uniform(42, uint64_t(i / 1000), uint64_t(i % 1000));
    ASSERT_GT(x, 0.0);
    ASSERT_LT(x, 1.0);
    all.push_back(x);
    sum += x;
    sum_sq += x * x;
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a value repeats";
  double mean = sum / n, var = sum_sq / n - mean * mean;
  // Standard errors: 1/sqrt(12 n) ≈ 6.5e-4 for the mean, ≈ 2e-4 for the variance.
  EXPECT_NEAR(mean, 0.5, 4e-3);
  EXPECT_NEAR(var, 1.0 / 12.0, 1.5e-3);
}

TEST(Philox, UniformDecilesAreEvenlyFilled) {
  int counts[10] = {};
  const int n = 100000;
  for (int i = 0; i < n; i++) counts[int(philox_uniform(7, uint64_t(i)) * 10)]++;
  double chi2 = 0;
  for (int c : counts) chi2 += (c - n / 10.0) * (c - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 27.9);  // 9 degrees of freedom, p = 0.001
}

}  // namespace philox_test
}  // namespace tandem
