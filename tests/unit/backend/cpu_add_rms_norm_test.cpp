// add_rms_norm (the fused residual add + RMSNorm) against add() followed by rms_norm().
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace {

using test::device_f32;
using test::to_vec;

TEST(CpuAddRmsNorm, EqualsAddThenRmsNormBitForBit) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [R, C] : {std::pair{1, 64}, {5, 24}, {33, 100}}) {
      for (float offset : {0.f, 1.f}) {
        SCOPED_TRACE(testing::Message() << R << "x" << C << " offset " << offset);
        auto res = test::random_vec(rng, size_t(R * C), -3.f, 3.f);
        auto x = test::random_vec(rng, size_t(R * C), -3.f, 3.f);
        auto w = test::random_vec(rng, size_t(C));
        Tensor wd = device_f32(*be, w, {C}), xd = device_f32(*be, x, {R, C});

        // The reference: two separate ops.
        Tensor res_ref = device_f32(*be, res, {R, C});
        Tensor out_ref = be->alloc(DType::F32, {R, C});
        be->add(res_ref, res_ref, xd);
        be->rms_norm(out_ref, res_ref, wd, 1e-6f, offset);

        Tensor res_d = device_f32(*be, res, {R, C});
        Tensor out = be->alloc(DType::F32, {R, C});
        be->add_rms_norm(out, res_d, xd, wd, 1e-6f, offset);
        EXPECT_EQ(to_vec(*be, res_d), to_vec(*be, res_ref));
        EXPECT_EQ(to_vec(*be, out), to_vec(*be, out_ref));

        // out may alias x.
        Tensor res2 = device_f32(*be, res, {R, C});
        Tensor x2 = device_f32(*be, x, {R, C});
        be->add_rms_norm(x2, res2, x2, wd, 1e-6f, offset);
        EXPECT_EQ(to_vec(*be, res2), to_vec(*be, res_ref));
        EXPECT_EQ(to_vec(*be, x2), to_vec(*be, out_ref));
      }
    }
  }
}

TEST(CpuAddRmsNorm, RejectsBadShapesAndAliasing) {
  auto be = make_cpu_backend();
  Tensor res = be->zeros(DType::F32, {3, 8}), x = be->zeros(DType::F32, {3, 8});
  Tensor out = be->alloc(DType::F32, {3, 8}), w = be->zeros(DType::F32, {8});
  EXPECT_THROW(be->add_rms_norm(res, res, x, w, 1e-6f, 0.f), Error);
  EXPECT_THROW(be->add_rms_norm(out, res, be->zeros(DType::F32, {3, 7}), w, 1e-6f, 0.f), Error);
  EXPECT_THROW(be->add_rms_norm(out, res, x, be->zeros(DType::F32, {4}), 1e-6f, 0.f), Error);
}

}  // namespace
}  // namespace tandem
