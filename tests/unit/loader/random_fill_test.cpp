// The counter-based random fills: deterministic, independent of how the work is split,
// and distributed as the Irwin–Hall(4) approximation of a normal that they claim.
#include "loader/random_fill.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"
#include "loader_test_util.h"

namespace tandem {
namespace random_fill_test {

constexpr size_t kN = size_t(1) << 20;

std::vector<float> f32_fill(size_t n, uint64_t seed, float stddev, uint64_t first = 0) {
  std::vector<float> v(n);
  fill_random_f32(v.data(), n, seed, stddev, first);
  return v;
}

TEST(RandomFill, DeterministicForASeed) {
  EXPECT_EQ(f32_fill(kN, 7, 1.f), f32_fill(kN, 7, 1.f));
  std::vector<float> a = f32_fill(kN, 7, 1.f), b = f32_fill(kN, 8, 1.f);
  size_t same = 0;
  for (size_t i = 0; i < kN; i++) same += a[i] == b[i];
  EXPECT_LT(same, kN / 100);  // a 2^18-level discrete value collides rarely
}

// Any slice can be generated on its own, so the result cannot depend on thread count.
TEST(RandomFill, SlicesMatchTheWholeStream) {
  std::vector<float> whole = f32_fill(kN, 3, 0.5f);
  size_t cut = 333331;
  std::vector<float> head = f32_fill(cut, 3, 0.5f, 0);
  std::vector<float> tail = f32_fill(kN - cut, 3, 0.5f, cut);
  head.insert(head.end(), tail.begin(), tail.end());
  EXPECT_EQ(head, whole);
  for (size_t i : {size_t(0), size_t(1), cut, kN - 1})
    EXPECT_EQ(whole[i], random_normal_at(3, i, 0.5f)) << i;
}

TEST(RandomFill, IndicesPastTwoToThe32) {
  const uint64_t first = (uint64_t(1) << 32) - 5;  // the slice crosses the 2^32 boundary
  std::vector<float> v = f32_fill(10, 11, 1.f, first);
  for (size_t k = 0; k < 10; k++) EXPECT_EQ(v[k], random_normal_at(11, first + k, 1.f)) << k;
  // The high bits of the index matter: element i and element i + 2^32 differ.
  int same = 0;
  for (uint64_t i = 0; i < 1000; i++)
    same += random_normal_at(11, i, 1.f) == random_normal_at(11, i + (uint64_t(1) << 32), 1.f);
  EXPECT_LT(same, 10);
}

// Irwin–Hall(4) rescaled: mean 0, sd 1, |z| <= 2·sqrt(3), and P(|z| < 1) = 1 − 2·F(2 − 1/√3)
// with F(x) = (x⁴ − 4(x − 1)⁴)/24 on [1, 2]: 0.6693 (a true normal gives 0.6827).
TEST(RandomFill, DistributionMatchesIrwinHall4) {
  const float stddev = 0.02f;
  std::vector<float> v = f32_fill(kN, 12345, stddev);
  double sum = 0, sum2 = 0, lag = 0;
  size_t within_one_sd = 0;
  float max_abs = 0;
  for (size_t i = 0; i < kN; i++) {
    double z = v[i] / stddev;
    sum += z;
    sum2 += z * z;
    if (i > 0) lag += z * (v[i - 1] / stddev);
    within_one_sd += std::fabs(z) < 1;
    max_abs = std::max(max_abs, std::fabs(v[i]));
  }
  double mean = sum / kN, var = sum2 / kN - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.005);  // sd of the mean is 1/1024
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_NEAR(lag / kN, 0.0, 0.005);  // neighbours uncorrelated
  double x = 2 - 1 / std::sqrt(3.0);
  double expected = 1 - 2 * (std::pow(x, 4) - 4 * std::pow(x - 1, 4)) / 24;
  EXPECT_NEAR(double(within_one_sd) / kN, expected, 0.003);
  EXPECT_LE(max_abs, 2 * std::sqrt(3.f) * stddev * 1.0001f);
  EXPECT_GT(max_abs, 3.f * stddev);  // the tails are reached
}

TEST(RandomFill, Bf16AndF16AreTheRoundedF32Stream) {
  std::vector<float> ref = f32_fill(kN, 99, 0.1f);
  std::vector<uint16_t> bf16(kN), f16(kN);
  fill_random_bf16(bf16.data(), kN, 99, 0.1f);
  fill_random(f16.data(), DType::F16, kN, 99, 0.1f);
  for (size_t i = 0; i < kN; i++) {
    ASSERT_EQ(bf16[i], f32_to_bf16(ref[i])) << i;
    ASSERT_EQ(f16[i], f32_to_f16(ref[i])) << i;
  }
}

// Through the writer's chunks, a tensor holds exactly the stream a single fill makes.
TEST(RandomFill, ChunkFillWritesTheStream) {
  test::TempDir dir;
  SafetensorsWriter w;
  w.add_chunked("w", DType::BF16, {1000, 3000}, random_chunk_fill(DType::BF16, 5, 0.02f));
  w.write(dir / "r.safetensors");
  Tensor t = SafetensorsFile::open(dir / "r.safetensors")->tensor("w");
  std::vector<uint16_t> expected(3000000);
  fill_random_bf16(expected.data(), expected.size(), 5, 0.02f);
  ASSERT_EQ(t.numel(), 3000000);
  EXPECT_EQ(std::memcmp(t.data, expected.data(), t.nbytes()), 0);
  EXPECT_THROW(random_chunk_fill(DType::I32, 5, 1.f), Error);
}

TEST(RandomFill, RejectsI32) {
  int32_t x;
  EXPECT_THROW(fill_random(&x, DType::I32, 1, 0, 1.f), Error);
}

}  // namespace random_fill_test
}  // namespace tandem
