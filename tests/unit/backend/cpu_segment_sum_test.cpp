// segment_sum (the runs an embedding row pools) against a plain loop in double, on runs of
// every kind: long, of one row, empty; and bad arguments refused with the op's name.
#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace cpu_segment_sum_test {

std::vector<double> reference(const std::vector<float>& x, const std::vector<int32_t>& starts,
                              int D) {
  std::vector<double> out((starts.size() - 1) * size_t(D), 0.0);
  for (size_t e = 0; e + 1 < starts.size(); e++)
    for (int32_t q = starts[e]; q < starts[e + 1]; q++)
      for (int d = 0; d < D; d++)
        out[e * size_t(D) + size_t(d)] += x[size_t(q) * size_t(D) + size_t(d)];
  return out;
}

TEST(CpuSegmentSum, MatchesAPlainLoop) {
  auto be = make_cpu_backend();
  const std::vector<int32_t> starts{0, 300, 301, 301, 345, 346};  // long, one, empty, ...
  const int Q = 346, D = 96;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    std::vector<float> x = test::random_vec(rng, size_t(Q) * D);
    Tensor out = be->alloc(DType::F32, {int64_t(starts.size()) - 1, D});
    be->segment_sum(out, test::device_f32(*be, x, {Q, D}),
                    test::device_i32(*be, starts, {int64_t(starts.size())}));
    const std::vector<float> got = test::to_vec(*be, out);
    EXPECT_LE(test::rel_err(got, reference(x, starts, D)), 1e-6);
    for (int d = 0; d < D; d++) EXPECT_EQ(got[2 * size_t(D) + size_t(d)], 0.f);  // the empty run
  }
}

TEST(CpuSegmentSum, BadRunsAreRefused) {
  auto be = make_cpu_backend();
  Tensor x = be->zeros(DType::F32, {4, 8});
  Tensor out = be->alloc(DType::F32, {2, 8});
  auto sum = [&](std::vector<int32_t> starts, Tensor o) {
    be->segment_sum(o, x, test::device_i32(*be, starts, {int64_t(starts.size())}));
  };
  EXPECT_THROW(sum({0, 3, 2}, out), Error);  // a run ends before it starts
  EXPECT_THROW(sum({0, 2, 3}, out), Error);  // rows left over
  EXPECT_THROW(sum({0, 2, 4}, be->alloc(DType::F32, {3, 8})), Error);  // out's shape
  EXPECT_THROW(sum({0, 2, 4}, be->alloc(DType::I32, {2, 8})), Error);  // out's dtype
  try {
    sum({1, 2, 4}, out);
    FAIL() << "a run start past 0 was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("segment_sum"), std::string::npos);
  }
}

}  // namespace cpu_segment_sum_test
}  // namespace tandem
