// add_rms_norm (the fused residual add + RMSNorm) against add() followed by rms_norm().
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace cpu_add_rms_norm_test {

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

// The CPU backend makes no e4m3 copy of an input (Fp8Input: a CUDA fusion): its _fp8 forms
// are the plain ops, they leave the copy undefined (even one set before), and its linears
// quantize x themselves.
TEST(CpuAddRmsNorm, Fp8FormsAreThePlainOps) {
  auto be = make_cpu_backend();
  std::mt19937 rng(7);
  const int64_t R = 3, C = 32;
  auto res = test::random_vec(rng, size_t(R * C), -3.f, 3.f);
  Tensor x = device_f32(*be, test::random_vec(rng, size_t(R * C), -3.f, 3.f), {R, C});
  Tensor w = device_f32(*be, test::random_vec(rng, size_t(C)), {C});
  Tensor res_a = device_f32(*be, res, {R, C}), res_b = device_f32(*be, res, {R, C});
  Tensor out_a = be->alloc(DType::F32, {R, C}), out_b = be->alloc(DType::F32, {R, C});
  be->add_rms_norm(out_a, res_a, x, w, 1e-6f, 0.f);
  Fp8Input q{be->zeros(DType::F32, {R, C}), be->zeros(DType::F32, {R})};
  be->add_rms_norm_fp8(out_b, q, res_b, x, w, 1e-6f, 0.f);
  EXPECT_FALSE(q.defined());
  EXPECT_EQ(to_vec(*be, out_a), to_vec(*be, out_b));
  EXPECT_EQ(to_vec(*be, res_a), to_vec(*be, res_b));

  Tensor n_a = be->alloc(DType::F32, {R, C}), n_b = be->alloc(DType::F32, {R, C});
  be->rms_norm(n_a, x, w, 1e-6f, 1.f);
  be->rms_norm_fp8(n_b, q, x, w, 1e-6f, 1.f);
  EXPECT_FALSE(q.defined());
  EXPECT_EQ(to_vec(*be, n_a), to_vec(*be, n_b));

  Tensor gu = device_f32(*be, test::random_vec(rng, size_t(R * 2 * C), -3.f, 3.f), {R, 2 * C});
  Tensor g_a = be->alloc(DType::F32, {R, C}), g_b = be->alloc(DType::F32, {R, C});
  be->gated_act(g_a, gu, Activation::SiLU);
  be->gated_act_fp8(g_b, q, gu, Activation::SiLU);
  EXPECT_FALSE(q.defined());
  EXPECT_EQ(to_vec(*be, g_a), to_vec(*be, g_b));

  Linear l;
  l.weight = device_f32(*be, test::random_vec(rng, size_t(16 * C)), {16, C});
  Tensor y_a = be->alloc(DType::F32, {R, 16}), y_b = be->alloc(DType::F32, {R, 16});
  be->linear(y_a, x, l);
  be->linear_fp8_input(y_b, x, q, l);
  EXPECT_EQ(to_vec(*be, y_a), to_vec(*be, y_b));
}

TEST(CpuAddRmsNorm, RejectsBadShapesAndAliasing) {
  auto be = make_cpu_backend();
  Tensor res = be->zeros(DType::F32, {3, 8}), x = be->zeros(DType::F32, {3, 8});
  Tensor out = be->alloc(DType::F32, {3, 8}), w = be->zeros(DType::F32, {8});
  EXPECT_THROW(be->add_rms_norm(res, res, x, w, 1e-6f, 0.f), Error);
  EXPECT_THROW(be->add_rms_norm(out, res, be->zeros(DType::F32, {3, 7}), w, 1e-6f, 0.f), Error);
  EXPECT_THROW(be->add_rms_norm(out, res, x, be->zeros(DType::F32, {4}), 1e-6f, 0.f), Error);
}

}  // namespace cpu_add_rms_norm_test
}  // namespace tandem
