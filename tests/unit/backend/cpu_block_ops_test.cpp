// The CPU backend's ops on ggml block-type weights: weight_dtype keeps them, embedding decodes
// rows as dequantize_row does, linear adds its bias, and moe_experts on block experts (each
// projection its own type) is bit for bit moe_experts on the decoded f32 experts in the exact
// arithmetic, and near it in the integer one. Bad shapes are refused with the type named.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>
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
    const Blocks table = random_blocks(t, {12, 512}, rng);
    const std::vector<int32_t> ids = {5, 0, 11, 5};
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

// Under Int8, upload packs panels beside the blocks (cpu_block_panels.h) and linear reads them
// for a weight and for its views that start at a whole panel; a view that starts inside one
// runs the row kernels. Under Exact nothing is packed.
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
  // rows [r0, r0 + n) of the product, straight from the kernels, with or without panels.
  auto kernels = [&](int64_t r0, int64_t n, bool panels) {
    const uint8_t* rows = w.blocks.ptr<uint8_t>() + r0 * int64_t(dtype_row_bytes(DType::Q4_K, K));
    std::vector<uint8_t> packed(cpu::block_panels_bytes(DType::Q4_K, n, K));
    if (panels) cpu::pack_block_panels(be.pool(), DType::Q4_K, rows, n, K, packed.data());
    std::vector<float> out(size_t(M * n));
    cpu::block_gemm_xwt(be.pool(), out.data(), x.data(), rows, DType::Q4_K, M, n, K,
                        cpu::BlockArithmetic::Int8, be.isa(), panels ? packed.data() : nullptr);
    return out;
  };
  auto linear = [&](const Tensor& weight) {
    Tensor out = be.alloc(DType::F32, {M, weight.dim(0)});
    be.linear(out, test::device_f32(be, x, {M, K}), Linear{weight});
    return test::to_vec(be, out);
  };
  for (auto [r0, n, panels] : {std::tuple{int64_t(0), N, true}, {16, 24, true}, {8, 32, false}}) {
    SCOPED_TRACE(testing::Message() << "rows " << r0 << "+" << n);
    const std::vector<float> got = linear(wd.slice_rows(r0, n)), want = kernels(r0, n, panels);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
    if (!panels) {  // the rows a misplaced panel would have given differ
      EXPECT_NE(std::memcmp(got.data(), kernels(r0, n, true).data(), got.size() * 4), 0);
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
