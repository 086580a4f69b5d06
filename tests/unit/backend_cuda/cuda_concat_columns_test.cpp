// concat_columns on the CUDA backend (the join of a projection stored in pieces of different
// weight types, backend/linear.h): split_columns' inverse, and the CPU default's twin.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_concat_columns_test {

using test::to_vec;

TEST(CudaConcatColumns, JoinsPiecesLikeTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  auto cpu = make_cpu_backend();
  const int64_t R = 7;
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<float> a(static_cast<size_t>(R * 3)), b(static_cast<size_t>(R * 5)), c(static_cast<size_t>(R));
    std::iota(a.begin(), a.end(), 1.f);
    std::iota(b.begin(), b.end(), 100.f);
    std::iota(c.begin(), c.end(), 200.f);
    std::vector<Tensor> parts = {test::put_as(gpu, a, {R, 3}, dt), test::put_as(gpu, b, {R, 5}, dt),
                                 test::put_as(gpu, c, {R, 1}, dt)};
    Tensor out = test::poisoned(gpu, dt, {R, 9});
    gpu.concat_columns(out, parts);
    const auto got = to_vec(gpu, out);
    for (int64_t r = 0; r < R; r++) {
      for (int64_t j = 0; j < 3; j++) EXPECT_EQ(got[size_t(r * 9 + j)], a[size_t(r * 3 + j)]);
      for (int64_t j = 0; j < 5; j++) EXPECT_EQ(got[size_t(r * 9 + 3 + j)], b[size_t(r * 5 + j)]);
      EXPECT_EQ(got[size_t(r * 9 + 8)], c[size_t(r)]);
    }
    // The CPU default gives the same bytes.
    std::vector<Tensor> host = {test::put_as(*cpu, a, {R, 3}, dt), test::put_as(*cpu, b, {R, 5}, dt),
                                test::put_as(*cpu, c, {R, 1}, dt)};
    Tensor cpu_out = cpu->alloc(dt, {R, 9});
    cpu->concat_columns(cpu_out, host);
    EXPECT_EQ(to_vec(*cpu, cpu_out), got);
    Tensor bad = gpu.alloc(dt, {R, 8});
    EXPECT_THROW(gpu.concat_columns(bad, parts), Error);
  }
}

}  // namespace cuda_concat_columns_test
}  // namespace tandem
