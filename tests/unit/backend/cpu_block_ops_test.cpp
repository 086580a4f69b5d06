// The CPU backend's ops on ggml block-type weights: weight_dtype keeps them, embedding decodes
// rows as dequantize_row does, linear adds its bias, and moe_experts on block experts (each
// projection its own type) is bit for bit moe_experts on the decoded f32 experts in the exact
// arithmetic, and near it in the integer one. Bad shapes are refused with the type named.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/block_quant.h"
#include "core/error.h"

namespace tandem {
namespace cpu_block_ops_test {

struct Blocks {
  Tensor blocks;  // host, in the block type
  Tensor values;  // host f32, decoded
};

Blocks random_blocks(DType t, Shape shape, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.1f);
  Blocks b{Tensor::empty_host(t, shape), Tensor::empty_host(DType::F32, shape)};
  const int64_t K = shape[-1], rows = b.values.rows();
  std::vector<float> row(static_cast<size_t>(K));
  const size_t row_bytes = dtype_row_bytes(t, K);
  for (int64_t r = 0; r < rows; r++) {
    for (float& v : row) v = dist(rng);
    quantize_row(t, row.data(), b.blocks.ptr<uint8_t>() + size_t(r) * row_bytes, K);
    dequantize_row(t, b.blocks.ptr<uint8_t>() + size_t(r) * row_bytes,
                   b.values.ptr<float>() + r * K, K);
  }
  return b;
}

TEST(CpuBlockOps, WeightDtypeKeepsBlocks) {
  CpuBackend be;
  EXPECT_EQ(be.weight_dtype(DType::Q4_K), DType::Q4_K);
  EXPECT_EQ(be.weight_dtype(DType::IQ4_XS), DType::IQ4_XS);
}

TEST(CpuBlockOps, EmbeddingDecodesTheRows) {
  CpuBackend be;
  std::mt19937 rng(3);
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::IQ4_NL}) {
    // 40 rows: two panels (rows 0–31, held as panels under Int8) and 8 rows of blocks.
    const Blocks table = random_blocks(t, {40, 512}, rng);
    const std::vector<int32_t> ids = {5, 0, 39, 17};
    Tensor out = be.alloc(DType::F32, {4, 512});
    be.embedding(out, be.upload(table.blocks, t), test::device_i32(be, ids, {4}), 2.f);
    for (size_t i = 0; i < ids.size(); i++)
      for (int64_t d = 0; d < 512; d++)
        ASSERT_EQ(out.ptr<float>()[int64_t(i) * 512 + d],
                  table.values.ptr<float>()[ids[i] * 512 + d] * 2.f)
            << dtype_name(t);
  }
}

TEST(CpuBlockOps, LinearAddsTheBias) {
  CpuBackend be;
  be.set_block_arithmetic(cpu::BlockArithmetic::Exact);
  std::mt19937 rng(4);
  const Blocks w = random_blocks(DType::Q5_K, {24, 256}, rng);
  const std::vector<float> x = test::random_vec(rng, 3 * 256), bias = test::random_vec(rng, 24);
  Linear l{be.upload(w.blocks, DType::Q5_K), test::device_f32(be, bias, {24})};
  Tensor out = be.alloc(DType::F32, {3, 24});
  be.linear(out, test::device_f32(be, x, {3, 256}), l);
  std::vector<double> ref(3 * 24);
  for (int m = 0; m < 3; m++)
    for (int n = 0; n < 24; n++) {
      double s = bias[size_t(n)];
      for (int k = 0; k < 256; k++)
        s += double(x[size_t(m * 256 + k)]) * w.values.ptr<float>()[n * 256 + k];
      ref[size_t(m * 24 + n)] = s;
    }
  EXPECT_LT(test::rel_err(test::to_vec(be, out), ref), test::kTol);
}

// Under Int8, upload packs panels in place of the blocks (cpu_block_panels.h,
// cpu_block_panel_store.h): linear reads them for a weight and for each of its views; a view
// that starts inside a panel gets the rows the whole weight gives (its panels computed whole,
// its columns cut out). Under Exact nothing is packed.
TEST(CpuBlockOps, Int8LinearReadsThePanelsPackedAtUpload) {
  CpuBackend be, exact;
  exact.set_block_arithmetic(cpu::BlockArithmetic::Exact);
  std::mt19937 rng(6);
  const int64_t N = 40, K = 512, M = 3;
  const Blocks w = random_blocks(DType::Q4_K, {N, K}, rng);
  const std::vector<float> x = test::random_vec(rng, size_t(M * K));
  const Tensor wd = be.upload(w.blocks, DType::Q4_K);
  exact.upload(w.blocks, DType::Q4_K);
  EXPECT_EQ(be.block_panel_bytes(), cpu::block_panels_bytes(DType::Q4_K, N, K));
  EXPECT_GT(be.block_panel_bytes(), 0u);
  EXPECT_EQ(exact.block_panel_bytes(), 0u);
  // The whole product straight from the kernels over the panels of the host's blocks.
  std::vector<uint8_t> packed(cpu::block_panels_bytes(DType::Q4_K, N, K));
  cpu::pack_block_panels(be.pool(), DType::Q4_K, w.blocks.data, N, K, packed.data());
  std::vector<float> want(size_t(M * N));
  cpu::block_gemm_xwt(be.pool(), want.data(), x.data(), w.blocks.data, DType::Q4_K, M, N, K,
                      cpu::BlockArithmetic::Int8, be.isa(), packed.data());
  auto linear = [&](const Tensor& weight) {
    Tensor out = be.alloc(DType::F32, {M, weight.dim(0)});
    be.linear(out, test::device_f32(be, x, {M, K}), Linear{weight});
    return test::to_vec(be, out);
  };
  for (auto [r0, n] : {std::pair{int64_t(0), N}, {16, 24}, {8, 32}, {0, 24}, {3, 5}, {33, 7}}) {
    SCOPED_TRACE(testing::Message() << "rows " << r0 << "+" << n);
    const std::vector<float> got = linear(wd.slice_rows(r0, n));
    for (int64_t m = 0; m < M; m++)
      ASSERT_EQ(std::memcmp(got.data() + m * n, want.data() + m * N + r0, size_t(n) * 4), 0);
  }
}

// The panels hold the blocks' values bit for bit: to_host_f32 and the exact arithmetic (set
// after upload) give dequantize_row's values and the exact kernels' outputs; copying the
// blocks out is refused, naming the type.
TEST(CpuBlockOps, PanelsInPlaceOfBlocksKeepEveryValue) {
  std::mt19937 rng(7);
  const int64_t N = 37, M = 5;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t K = 512;
    const Blocks w = random_blocks(t, {N, K}, rng);
    CpuBackend be, exact;
    exact.set_block_arithmetic(cpu::BlockArithmetic::Exact);
    const Tensor wd = be.upload(w.blocks, t), we = exact.upload(w.blocks, t);
    ASSERT_GT(be.block_panel_bytes(), 0u);
    const Tensor values = be.to_host_f32(wd);
    ASSERT_EQ(std::memcmp(values.data, w.values.data, w.values.nbytes()), 0);
    const std::vector<float> x = test::random_vec(rng, size_t(M * K));
    be.set_block_arithmetic(cpu::BlockArithmetic::Exact);
    for (auto [r0, n] : {std::pair{int64_t(0), N}, {5, 20}}) {
      Tensor got = be.alloc(DType::F32, {M, n}), ref = exact.alloc(DType::F32, {M, n});
      be.linear(got, test::device_f32(be, x, {M, K}), Linear{wd.slice_rows(r0, n)});
      exact.linear(ref, test::device_f32(exact, x, {M, K}), Linear{we.slice_rows(r0, n)});
      ASSERT_EQ(std::memcmp(got.data, ref.data, size_t(M * n) * 4), 0) << r0 << "+" << n;
    }
    Tensor copy = be.zeros(t, {N, K});
    try {
      be.copy(copy, wd);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dtype_name(t)), std::string::npos) << e.what();
    }
  }
}

TEST(CpuBlockOps, MoeOnBlockExpertsIsMoeOnTheDecodedExperts) {
  std::mt19937 rng(5);
  const int64_t T = 9, D = 256, F = 512, E = 3, k = 2;
  const Blocks gu = random_blocks(DType::Q4_K, {E, 2 * F, D}, rng),
               dn = random_blocks(DType::Q6_K, {E, D, F}, rng);
  const std::vector<float> x = test::random_vec(rng, size_t(T * D));
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> w(size_t(T * k));
  for (int64_t i = 0; i < T * k; i++)
    ids[size_t(i)] = int32_t((i * 5 + i / k) % E), w[size_t(i)] = 0.5f;
  auto run = [&](CpuBackend& be, bool blocks) {
    Tensor out = be.alloc(DType::F32, {T, D});
    Linear g{blocks ? be.upload(gu.blocks, DType::Q4_K) : be.upload(gu.values, DType::F32)};
    Linear d{blocks ? be.upload(dn.blocks, DType::Q6_K) : be.upload(dn.values, DType::F32)};
    be.moe_experts(out, test::device_f32(be, x, {T, D}), test::device_f32(be, w, {T, k}),
                   test::device_i32(be, ids, {T, k}), g, d, Activation::SiLU);
    return test::to_vec(be, out);
  };
  CpuBackend exact, int8;
  exact.set_block_arithmetic(cpu::BlockArithmetic::Exact);
  int8.set_block_arithmetic(cpu::BlockArithmetic::Int8);
  const std::vector<float> decoded = run(exact, false), got = run(exact, true);
  EXPECT_EQ(std::memcmp(got.data(), decoded.data(), got.size() * 4), 0);
  EXPECT_LT(test::rel_err(run(int8, true), decoded), 3e-2);
}

TEST(CpuBlockOps, RefusesPartialBlocksNamingTheType) {
  CpuBackend be;
  Tensor table = be.zeros(DType::Q4_0, {4, 48});
  Tensor out = be.alloc(DType::F32, {1, 48});
  try {
    be.embedding(out, table, test::device_i32(be, {1}, {1}), 1.f);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
  }
}

}  // namespace cpu_block_ops_test
}  // namespace tandem
