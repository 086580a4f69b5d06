// segment_sum (the runs an embedding row pools) on CUDA against its CPU twin, on fresh
// random inputs: bf16 and f32 rows, long runs, one-row runs, empty runs, widths that are not
// a multiple of a block; every output element written (the output starts as NaN).
#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_segment_sum_test {

TEST(CudaSegmentSum, MatchesCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const std::vector<int32_t> starts{0, 1000, 1001, 1001, 1100, 1357};
  const int64_t E = int64_t(starts.size()) - 1, Q = 1357;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (int64_t D : {1, 64, 300, 4096}) {
      for (DType dt : {DType::BF16, DType::F32}) {
        SCOPED_TRACE(D);
        const std::vector<float> x = test::random_bf16(rng, size_t(Q * D));
        Tensor cpu_out = be.cpu->alloc(DType::F32, {E, D});
        be.cpu->segment_sum(cpu_out, test::put(*be.cpu, x, {Q, D}),
                            test::put_i32(*be.cpu, starts, {E + 1}));
        Tensor gpu_out = test::poisoned(*be.gpu, DType::F32, {E, D});
        be.gpu->segment_sum(gpu_out, test::put_as(*be.gpu, x, {Q, D}, dt),
                            test::put_i32(*be.gpu, starts, {E + 1}));
        // The inputs are exact in both dtypes and both sum in f32 in row order.
        EXPECT_LE(test::rel_err_between(*be.gpu, gpu_out, *be.cpu, cpu_out), 1e-6);
        const std::vector<float> got = test::to_vec(*be.gpu, gpu_out);
        for (int64_t d = 0; d < D; d++) EXPECT_EQ(got[size_t(2 * D + d)], 0.f);  // the empty run
      }
    }
  }
}

TEST(CudaSegmentSum, BadShapesAreRefused) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  Tensor x = be.gpu->zeros(DType::BF16, {4, 8});
  Tensor starts = test::put_i32(*be.gpu, {0, 2, 4}, {3});
  Tensor wrong_rows = be.gpu->alloc(DType::F32, {3, 8});
  EXPECT_THROW(be.gpu->segment_sum(wrong_rows, x, starts), Error);
  Tensor wrong_dtype = be.gpu->alloc(DType::BF16, {2, 8});
  EXPECT_THROW(be.gpu->segment_sum(wrong_dtype, x, starts), Error);
}

}  // namespace cuda_segment_sum_test
}  // namespace tandem
