// CUDA ops against their CPU twins on fresh random inputs: linear, embedding (and the
// vocabulary-slice lookup of tensor-parallel ranks), gather_rows,
// rms_norm, add_rms_norm, add / scale / softcap, gated_act. Sizes are deliberately awkward
// (T = 1, odd K and N, rows that are not multiples of a vector width or a block).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/tp_ops.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_core_ops_test {

using test::kBf16Tol;
using test::put;
using test::rel_err_between;

TEST(CudaLinear, MatchesCpuOnOddShapesWithAndWithoutBias) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (int64_t T : {1, 3, 17, 300})
      for (auto [K, N] : {std::pair<int64_t, int64_t>{64, 96}, {33, 47}, {128, 1000}, {8, 7}}) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "T " << T << " K " << K << " N " << N << " bias "
                                          << with_bias);
          auto x = test::random_bf16(rng, size_t(T * K)), w = test::random_bf16(rng, size_t(N * K));
          auto b = test::random_bf16(rng, size_t(N));
          Tensor ref = be.cpu->alloc(DType::F32, {T, N});
          be.cpu->linear(ref, put(*be.cpu, x, {T, K}), Linear{put(*be.cpu, w, {N, K}), with_bias ? put(*be.cpu, b, {N}) : Tensor{}});
          Tensor out = test::poisoned(*be.gpu, DType::BF16, {T, N});
          be.gpu->linear(out, put(*be.gpu, x, {T, K}), Linear{put(*be.gpu, w, {N, K}), with_bias ? put(*be.gpu, b, {N}) : Tensor{}});
          EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
        }
      }
  }
}

// Views that start mid-allocation (2-byte aligned rows) must still give the right product.
TEST(CudaLinear, MisalignedViews) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(11);
  const int64_t T = 5, K = 33, N = 21;
  auto x = test::random_bf16(rng, size_t((T + 1) * K)), w = test::random_bf16(rng, size_t(N * K));
  auto b = test::random_bf16(rng, size_t(N));
  Tensor ref = be.cpu->alloc(DType::F32, {T, N});
  be.cpu->linear(ref, put(*be.cpu, x, {T + 1, K}).slice_rows(1, T), Linear{put(*be.cpu, w, {N, K}), put(*be.cpu, b, {N})});
  Tensor out_full = test::poisoned(*be.gpu, DType::BF16, {T + 1, N});
  Tensor out = out_full.slice_rows(1, T);
  be.gpu->linear(out, put(*be.gpu, x, {T + 1, K}).slice_rows(1, T), Linear{put(*be.gpu, w, {N, K}), put(*be.gpu, b, {N})});
  EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);

  // x's width must be w's K.
  Tensor out3 = test::poisoned(*be.gpu, DType::BF16, {3, 4});
  auto x3 = test::random_bf16(rng, 3 * 16), w3 = test::random_bf16(rng, 4 * 16);
  EXPECT_THROW(be.gpu->linear(out3, put(*be.gpu, x3, {3, 16}), Linear{put(*be.gpu, w3, {16, 4})}),
               Error);
}

TEST(CudaLinear, F32OutputForLogits) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(13);
  const int64_t T = 7, K = 64, N = 1003;
  auto x = test::random_bf16(rng, size_t(T * K)), w = test::random_bf16(rng, size_t(N * K));
  Tensor ref = be.cpu->alloc(DType::F32, {T, N});
  be.cpu->linear(ref, put(*be.cpu, x, {T, K}), Linear{put(*be.cpu, w, {N, K})});
  Tensor out = test::poisoned(*be.gpu, DType::F32, {T, N});
  be.gpu->linear(out, put(*be.gpu, x, {T, K}), Linear{put(*be.gpu, w, {N, K})});
  // Same bf16 inputs, f32 sums on both sides: far closer than a bf16 output could be.
  EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), 1e-4);
  auto b = test::random_bf16(rng, size_t(N));
  EXPECT_THROW(be.gpu->linear(out, put(*be.gpu, x, {T, K}), Linear{put(*be.gpu, w, {N, K}), put(*be.gpu, b, {N})}),
               Error);
}

TEST(CudaEmbedding, GathersAndScales) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(17);
  const int64_t V = 50;
  for (int64_t D : {64, 37})
    for (float scale : {1.f, 8.f}) {
      auto table = test::random_bf16(rng, size_t(V * D));
      std::vector<int32_t> ids = {0, 49, 3, 3, 17, 48, 1, 22, 9};
      const int64_t T = int64_t(ids.size());
      Tensor ref = be.cpu->alloc(DType::F32, {T, D});
      be.cpu->embedding(ref, put(*be.cpu, table, {V, D}), test::put_i32(*be.cpu, ids, {T}), scale);
      Tensor out = test::poisoned(*be.gpu, DType::BF16, {T, D});
      be.gpu->embedding(out, put(*be.gpu, table, {V, D}), test::put_i32(*be.gpu, ids, {T}), scale);
      EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol) << "D " << D;
    }
}

// A rank's slice [first, first + rows) of a vocabulary plus its zero row: ids outside it
// (below, above, negative) read zeros. The ids are mapped on the device (the CPU maps them
// on the host), so the rows gathered are the same bf16 values exactly.
TEST(CudaVocabSliceEmbedding, IdsOutsideTheSliceReadZerosAsOnTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(23);
  const int64_t rows = 40, D = 72;
  std::vector<float> table = test::random_bf16(rng, size_t(rows * D));
  table.resize(size_t((rows + 1) * D), 0.f);  // the zero row
  const std::vector<int32_t> ids = {0, 39, 40, 79, 80, 119, 120, 5000, -1, 57, 41};
  const int64_t T = int64_t(ids.size());
  for (int64_t first : {0, 40, 80}) {
    Tensor local_c = be.cpu->alloc(DType::I32, {T}), ref = be.cpu->alloc(DType::F32, {T, D});
    vocab_slice_ids(*be.cpu, local_c, test::put_i32(*be.cpu, ids, {T}), first, rows);
    be.cpu->embedding(ref, put(*be.cpu, table, {rows + 1, D}), local_c, 1.f);
    Tensor local_g = test::poisoned(*be.gpu, DType::I32, {T});
    vocab_slice_ids(*be.gpu, local_g, test::put_i32(*be.gpu, ids, {T}), first, rows);
    Tensor out = test::poisoned(*be.gpu, DType::BF16, {T, D});
    be.gpu->embedding(out, put(*be.gpu, table, {rows + 1, D}), local_g, 1.f);
    EXPECT_EQ(rel_err_between(*be.gpu, out, *be.cpu, ref), 0.0) << "first " << first;
    int in_slice = 0;
    for (int32_t id : ids) in_slice += id >= first && id < first + rows;
    const std::vector<float> got = test::to_vec(*be.gpu, out);
    int nonzero_rows = 0;
    for (int64_t t = 0; t < T; t++)
      nonzero_rows += std::any_of(got.begin() + t * D, got.begin() + (t + 1) * D,
                                  [](float v) { return v != 0.f; });
    EXPECT_EQ(nonzero_rows, in_slice) << "first " << first;
  }
}

TEST(CudaGatherRows, AnyDtypeAndRowWidth) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(19);
  const std::vector<int32_t> index = {4, 0, 4, 2};
  for (auto [dt, D] : {std::pair{DType::BF16, 64}, {DType::BF16, 37}, {DType::F32, 5},
                       {DType::I32, 3}}) {
    const int64_t T = 5, S = int64_t(index.size());
    auto x = test::random_bf16(rng, size_t(T * D), -100.f, 100.f);
    if (dt == DType::I32)
      for (float& v : x) v = std::round(v);
    Tensor xg = dt == DType::I32
                    ? test::put_i32(*be.gpu, std::vector<int32_t>(x.begin(), x.end()), {T, D})
                    : test::put_as(*be.gpu, x, {T, D}, dt);
    Tensor out = test::poisoned(*be.gpu, dt, {S, D});
    be.gpu->gather_rows(out, xg, test::put_i32(*be.gpu, index, {S}));
    const auto got = test::to_vec(*be.gpu, out);
    for (int64_t s = 0; s < S; s++)
      for (int64_t d = 0; d < D; d++)
        EXPECT_EQ(got[size_t(s * D + d)], x[size_t(index[size_t(s)] * D + d)]) << s << "," << d;
  }
}

TEST(CudaRmsNorm, MatchesCpuForBothWeightDtypesAndOffsets) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (auto [R, C] : {std::pair<int64_t, int64_t>{1, 64}, {7, 100}, {300, 128}, {3, 3000},
                        {5, 4096}, {2, 2050}, {9, 1024}})
      for (float offset : {0.f, 1.f})
        for (DType wdt : {DType::BF16, DType::F32}) {
          SCOPED_TRACE(testing::Message() << R << "x" << C << " offset " << offset << " w "
                                          << dtype_name(wdt));
          auto x = test::random_bf16(rng, size_t(R * C), -3.f, 3.f);
          auto w = test::random_bf16(rng, size_t(C));
          Tensor ref = be.cpu->alloc(DType::F32, {R, C});
          be.cpu->rms_norm(ref, put(*be.cpu, x, {R, C}), put(*be.cpu, w, {C}), 1e-6f, offset);
          Tensor wg = test::put_as(*be.gpu, w, {C}, wdt);
          Tensor out = test::poisoned(*be.gpu, DType::BF16, {R, C});
          be.gpu->rms_norm(out, put(*be.gpu, x, {R, C}), wg, 1e-6f, offset);
          EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
          Tensor xg = put(*be.gpu, x, {R, C});
          be.gpu->rms_norm(xg, xg, wg, 1e-6f, offset);  // in place: the same bits
          EXPECT_EQ(test::to_vec(*be.gpu, xg), test::to_vec(*be.gpu, out));
        }
  }
}

TEST(CudaAddRmsNorm, MatchesCpuAddThenRmsNorm) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(23);
  for (auto [R, C] : {std::pair<int64_t, int64_t>{1, 64}, {7, 100}, {33, 2048}, {4, 3001}})
    for (float offset : {0.f, 1.f}) {
      SCOPED_TRACE(testing::Message() << R << "x" << C << " offset " << offset);
      auto res = test::random_bf16(rng, size_t(R * C), -3.f, 3.f);
      auto x = test::random_bf16(rng, size_t(R * C), -3.f, 3.f);
      auto w = test::random_bf16(rng, size_t(C));
      Tensor res_ref = put(*be.cpu, res, {R, C}), out_ref = be.cpu->alloc(DType::F32, {R, C});
      be.cpu->add(res_ref, res_ref, put(*be.cpu, x, {R, C}));
      be.cpu->rms_norm(out_ref, res_ref, put(*be.cpu, w, {C}), 1e-6f, offset);

      Tensor res_g = put(*be.gpu, res, {R, C}), wg = put(*be.gpu, w, {C});
      Tensor out = test::poisoned(*be.gpu, DType::BF16, {R, C});
      be.gpu->add_rms_norm(out, res_g, put(*be.gpu, x, {R, C}), wg, 1e-6f, offset);
      EXPECT_LE(rel_err_between(*be.gpu, res_g, *be.cpu, res_ref), kBf16Tol);
      EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, out_ref), kBf16Tol);

      // The fused op equals the unfused pair on the GPU too, and out may alias x.
      Tensor res2 = put(*be.gpu, res, {R, C}), x2 = put(*be.gpu, x, {R, C});
      Tensor out2 = test::poisoned(*be.gpu, DType::BF16, {R, C});
      be.gpu->add(res2, res2, x2);
      be.gpu->rms_norm(out2, res2, wg, 1e-6f, offset);
      Tensor res3 = put(*be.gpu, res, {R, C});
      be.gpu->add_rms_norm(x2, res3, x2, wg, 1e-6f, offset);
      EXPECT_EQ(test::to_vec(*be.gpu, res3), test::to_vec(*be.gpu, res2));
      EXPECT_EQ(test::to_vec(*be.gpu, x2), test::to_vec(*be.gpu, out2));
    }
  Tensor r = be.gpu->zeros(DType::BF16, {2, 8});
  EXPECT_THROW(be.gpu->add_rms_norm(r, r, r, be.gpu->zeros(DType::BF16, {8}), 1e-6f, 0.f), Error);
}

TEST(CudaElementwise, AddScaleSoftcapInBothDtypes) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(29);
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t n : {1001, 1024, 1}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n " << n);
      auto a = test::random_bf16(rng, size_t(n), -40.f, 40.f), b = test::random_bf16(rng, size_t(n));
      Tensor ac = put(*be.cpu, a, {n}), bc = put(*be.cpu, b, {n});
      Tensor ag = test::put_as(*be.gpu, a, {n}, dt), bg = test::put_as(*be.gpu, b, {n}, dt);
      Tensor ref = be.cpu->alloc(DType::F32, {n});
      Tensor out = test::poisoned(*be.gpu, dt, {n});
      be.cpu->add(ref, ac, bc);
      be.gpu->add(out, ag, bg);
      EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
      be.cpu->scale(ref, -0.75f);
      be.gpu->scale(out, -0.75f);
      EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
      be.cpu->softcap(ref, 20.f);
      be.gpu->softcap(out, 20.f);
      EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
      be.gpu->add(ag, ag, bg);  // in place
      be.cpu->add(ac, ac, bc);
      EXPECT_LE(rel_err_between(*be.gpu, ag, *be.cpu, ac), kBf16Tol);
    }
}

TEST(CudaGatedAct, SiluAndGeluTanh) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(31);
  for (auto [T, F] : {std::pair<int64_t, int64_t>{1, 8}, {7, 40}, {33, 129}, {300, 256}})
    for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
      SCOPED_TRACE(testing::Message() << T << "x" << F << " act " << int(act));
      auto gu = test::random_bf16(rng, size_t(T * 2 * F), -6.f, 6.f);
      Tensor ref = be.cpu->alloc(DType::F32, {T, F});
      be.cpu->gated_act(ref, put(*be.cpu, gu, {T, 2 * F}), act);
      Tensor out = test::poisoned(*be.gpu, DType::BF16, {T, F});
      be.gpu->gated_act(out, put(*be.gpu, gu, {T, 2 * F}), act);
      EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
    }
}

}  // namespace cuda_core_ops_test
}  // namespace tandem
