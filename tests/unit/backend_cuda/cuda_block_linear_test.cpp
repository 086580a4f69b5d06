// CUDA linears, embeddings and experts with ggml block-type weights against the CPU twin (the
// exact arithmetic: weights decoded as dequantize_row, f32 sums), on every type and each path
// of cuda_block_linear.cu: the 8-bit-activation weight stream (1–8 rows; also against its own
// twin, the f64 product with x quantized as the kernel quantizes it) and the decoded bf16
// copy (more rows; whole and in chunks of rows); the k-quant stream's variants against the
// same twin; the shared-memory tiles (TANDEM_GGUF_TILES) against the CPU and the copy; the
// MoE experts' grouped GEMMs on their tiles (the default) and on the wmma kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_block_linear.h"
#include "backend/gguf_tiles.h"
#include "core/block_quant.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_block_linear_test {

using test::put;

constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0,   DType::Q5_1,
                            DType::Q8_0, DType::Q2_K, DType::Q3_K,   DType::Q4_K,
                            DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

struct BlockWeight {
  std::vector<uint8_t> blocks;  // [rows, K] in blocks
  std::vector<float> values;    // the same, decoded
};

BlockWeight random_weight(DType t, int64_t rows, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.05f);
  std::vector<float> w(size_t(rows * K));
  for (float& v : w) v = dist(rng);
  BlockWeight b;
  const size_t row = dtype_row_bytes(t, K);
  b.blocks.resize(row * size_t(rows));
  b.values.resize(w.size());
  for (int64_t n = 0; n < rows; n++) {
    quantize_row(t, w.data() + n * K, b.blocks.data() + n * row, K);
    dequantize_row(t, b.blocks.data() + n * row, b.values.data() + n * K, K);
  }
  return b;
}

Tensor put_blocks(Backend& be, const BlockWeight& w, DType t, Shape shape) {
  return be.upload(Tensor::borrow(const_cast<uint8_t*>(w.blocks.data()), t, shape), t);
}

// The weight stream's own twin: x quantized per 32 as quantize_x_kernel does, then f64 sums
// against the decoded weights; mag[i] = Σ |w · x'| for the tolerance.
void gemv_twin(const std::vector<float>& x, const BlockWeight& w, int64_t M, int64_t N, int64_t K,
               std::vector<double>& ref, std::vector<double>& mag) {
  std::vector<double> xq(x.size());
  for (int64_t b = 0; b < M * K / 32; b++) {
    float amax = 0.f;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[size_t(32 * b + i)]));
    const float d = amax / 127.f, id = d > 0.f ? 1.f / d : 0.f;
    for (int i = 0; i < 32; i++) {
      const float q = std::fmin(std::fmax(std::round(x[size_t(32 * b + i)] * id), -127.f), 127.f);
      xq[size_t(32 * b + i)] = double(q) * d;
    }
  }
  ref.assign(size_t(M * N), 0.0);
  mag.assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) {
        const double p = double(w.values[size_t(n * K + k)]) * xq[size_t(m * K + k)];
        ref[size_t(m * N + n)] += p;
        mag[size_t(m * N + n)] += std::fabs(p);
      }
}

// The CPU twin's product in the exact arithmetic.
std::vector<float> cpu_linear(const std::vector<float>& x, const BlockWeight& w, DType t, int64_t M,
                              int64_t N, int64_t K, const std::vector<float>& bias) {
  CpuBackend cpu;
  cpu.set_block_arithmetic(cpu::BlockArithmetic::Exact);
  Linear l;
  l.weight = put_blocks(cpu, w, t, {N, K});
  if (!bias.empty()) l.bias = put(cpu, bias, {N});
  Tensor out = cpu.alloc(DType::F32, {M, N});
  cpu.linear(out, put(cpu, x, {M, K}), l);
  return test::to_vec(cpu, out);
}

std::vector<float> gpu_linear(CudaBackend& gpu, const std::vector<float>& x, const BlockWeight& w,
                              DType t, int64_t M, int64_t N, int64_t K,
                              const std::vector<float>& bias) {
  Linear l;
  l.weight = put_blocks(gpu, w, t, {N, K});
  if (!bias.empty()) l.bias = put(gpu, bias, {N});
  Tensor out = test::poisoned(gpu, bias.empty() ? DType::F32 : DType::BF16, {M, N});
  gpu.linear(out, put(gpu, x, {M, K}), l);
  return test::to_vec(gpu, out);
}

TEST(CudaBlockLinear, WeightStreamIsItsTwinAndNearTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(5);
  const int64_t N = 70, K = 512;
  for (DType t : kTypes)
    for (int64_t M : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " M=" << M);
      const BlockWeight w = random_weight(t, N, K, rng);
      const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
      const std::vector<float> got = gpu_linear(gpu, x, w, t, M, N, K, {});
      std::vector<double> ref, mag;
      gemv_twin(x, w, M, N, K, ref, mag);
      for (size_t i = 0; i < got.size(); i++)
        ASSERT_NEAR(got[i], ref[i], 1e-5 * mag[i] + 1e-6) << i;
      EXPECT_LT(test::rel_err(got, cpu_linear(x, w, t, M, N, K, {})), 2e-2);
    }
}

// The k-quant weight streams (1–2 rows: the split-K stream of cuda_block_gemv_split.cu;
// 3–8: the warp stream) against the same twin and the CPU: N not a multiple of any CTA's
// rows, K of 1, 5 and 19 super-blocks (19: the warps of a CTA take unequal shares, some none
// of the last step), 1–8 rows, f32 and bf16 + bias out.
TEST(CudaBlockLinear, KQuantStreamsAreTheTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(11);
  const int64_t N = 37;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int64_t K : {256, 1280, 4864})
      for (int64_t M = 1; M <= 8; M++) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " K=" << K << " M=" << M);
        const BlockWeight w = random_weight(t, N, K, rng);
        const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
        std::vector<float> bias;
        if (M % 3 == 0) bias = test::random_bf16(rng, size_t(N));
        const std::vector<float> got = gpu_linear(gpu, x, w, t, M, N, K, bias);
        std::vector<double> ref, mag;
        gemv_twin(x, w, M, N, K, ref, mag);
        for (size_t i = 0; i < got.size(); i++) {
          const double b = bias.empty() ? 0.0 : double(bias[i % size_t(N)]);
          // bf16 out (with a bias) rounds to 8 bits of mantissa.
          const double tol = bias.empty() ? 1e-5 * mag[i] + 1e-6
                                          : 4e-3 * std::fabs(ref[i] + b) + 1e-5 * mag[i] + 1e-6;
          ASSERT_NEAR(got[i], ref[i] + b, tol) << i;
        }
        EXPECT_LT(test::rel_err(got, cpu_linear(x, w, t, M, N, K, bias)), 2e-2);
      }
}

// Sets the many-row route (gguf_tiles(), TANDEM_GGUF_TILES) for a scope: the shared-memory
// tiles (the default, 9–64 rows) or the decoded copy; back to the default after.
struct TilesSetting {
  explicit TilesSetting(bool on) { set_gguf_tiles(on); }
  ~TilesSetting() { set_gguf_tiles(true); }
};

// The decoded copy (at 9–64 rows too, with the tiles turned off).
TEST(CudaBlockLinear, DecodedCopyMatchesTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  const TilesSetting copy(false);
  std::mt19937 rng(6);
  const int64_t N = 100, K = 768;
  for (DType t : kTypes)
    for (int64_t M : {9, 40, 128, 200}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " M=" << M);
      const BlockWeight w = random_weight(t, N, K, rng);
      const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
      const std::vector<float> got = gpu_linear(gpu, x, w, t, M, N, K, {});
      EXPECT_LT(test::rel_err(got, cpu_linear(x, w, t, M, N, K, {})), test::kBf16Tol);
    }
}

TEST(CudaBlockLinear, BiasAndBf16OutputOnEveryPath) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(7);
  const int64_t N = 48, K = 256;
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::Q6_K})
    for (int64_t M : {1, 6, 30, 150}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " M=" << M);
      const BlockWeight w = random_weight(t, N, K, rng);
      const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
      const std::vector<float> bias = test::random_bf16(rng, size_t(N));
      const std::vector<float> got = gpu_linear(gpu, x, w, t, M, N, K, bias);
      EXPECT_LT(test::rel_err(got, cpu_linear(x, w, t, M, N, K, bias)), 2e-2);
    }
}

// The decoded copy in chunks of rows (a bound of 40 rows of K here: chunks of 40, 40, 20
// rows), each chunk's columns copied into place; f32 out without a bias, bf16 with one.
TEST(CudaBlockLinear, DecodedCopyInChunksMatchesTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  const TilesSetting copy(false);
  std::mt19937 rng(8);
  const int64_t N = 100, K = 512, M = 24;
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0})
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << (with_bias ? " bias" : ""));
      const BlockWeight w = random_weight(t, N, K, rng);
      const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
      const std::vector<float> bias =
          with_bias ? test::random_bf16(rng, size_t(N)) : std::vector<float>{};
      Linear l;
      l.weight = put_blocks(gpu, w, t, {N, K});
      if (with_bias) l.bias = put(gpu, bias, {N});
      Tensor out = test::poisoned(gpu, with_bias ? DType::BF16 : DType::F32, {M, N});
      block_linear(gpu, out, put(gpu, x, {M, K}), l, 40 * 2 * K);
      EXPECT_LT(test::rel_err(test::to_vec(gpu, out), cpu_linear(x, w, t, M, N, K, bias)),
                with_bias ? 2e-2 : test::kBf16Tol);
    }
}

// gpu_linear on the decoded copy, the tiles turned off.
std::vector<float> copy_linear(CudaBackend& gpu, const std::vector<float>& x,
                               const BlockWeight& w, DType t, int64_t M, int64_t N, int64_t K,
                               const std::vector<float>& bias) {
  const TilesSetting off(false);
  return gpu_linear(gpu, x, w, t, M, N, K, bias);
}

// The tiles (cuda_block_tiles.cu) on every type against the CPU twin and the decoded copy:
// N = 200 (a whole and a partial 128-row tile), 9–64 rows (partial and whole 64-row tiles;
// kBlockTilesMaxRows: more take the copy); K = 256 (one step: the CTA stores out, with the
// bias) and 768 or, for 32-value blocks, 800 (K split across CTAs, then the partial sums' reduction with the bias; 800
// ends in a partial step). Rows of Q6_K, Q3_K, Q5_0 bytes are not 16-byte multiples.
TEST(CudaBlockLinear, SharedMemoryTilesMatchTheCpuAndTheDecodedCopy) {
  EXPECT_TRUE(gguf_tiles()) << "the tiles are the default";
  {
    const TilesSetting copy(false);
    EXPECT_FALSE(gguf_tiles());
  }
  EXPECT_TRUE(gguf_tiles());
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(12);
  const int64_t N = 200;
  for (DType t : kTypes)
    for (int64_t K : {int64_t(256), dtype_block(t).elems == 256 ? int64_t(768) : int64_t(800)})
      for (int64_t M : {9, 16, 33, 64})
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message()
                       << dtype_name(t) << " K=" << K << " M=" << M << (with_bias ? " bias" : ""));
          const BlockWeight w = random_weight(t, N, K, rng);
          const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
          const std::vector<float> bias =
              with_bias ? test::random_bf16(rng, size_t(N)) : std::vector<float>{};
          const std::vector<float> got = gpu_linear(gpu, x, w, t, M, N, K, bias);
          const std::vector<float> copy = copy_linear(gpu, x, w, t, M, N, K, bias);
          // Both decode the weight to the same bf16 values: only the order of the f32 sums
          // differs (and a bf16 output's rounding of them).
          EXPECT_LT(test::rel_err(got, copy), with_bias ? 4e-3 : 1e-4);
          EXPECT_LT(test::rel_err(got, cpu_linear(x, w, t, M, N, K, bias)),
                    with_bias ? 2e-2 : test::kBf16Tol);
        }
}

// Enough tiles for every SM of an H100 / H200 (132: 133 x 1 here), so K is not split: each
// CTA walks all of K's steps through both pipeline stages and stores out itself (with the
// bias). Against the decoded copy (tested against the CPU above).
TEST(CudaBlockLinear, SharedMemoryTilesUnsplitMatchTheDecodedCopy) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(13);
  const int64_t N = 17000, K = 768, M = 64;
  const std::vector<float> x = test::random_bf16(rng, size_t(M * K));
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q5_0}) {
    const BlockWeight w = random_weight(t, N, K, rng);
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << (with_bias ? " bias" : ""));
      const std::vector<float> bias =
          with_bias ? test::random_bf16(rng, size_t(N)) : std::vector<float>{};
      const std::vector<float> got = gpu_linear(gpu, x, w, t, M, N, K, bias);
      EXPECT_LT(test::rel_err(got, copy_linear(gpu, x, w, t, M, N, K, bias)),
                with_bias ? 4e-3 : 1e-4);
    }
  }
}

TEST(CudaBlockEmbedding, DecodesTheRowsOfTheIds) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  CpuBackend cpu;
  std::mt19937 rng(8);
  const int64_t V = 40, D = 512;
  const std::vector<int32_t> ids = {3, 0, 39, 3, 17};
  for (DType t : kTypes) {
    SCOPED_TRACE(dtype_name(t));
    const BlockWeight w = random_weight(t, V, D, rng);
    const int64_t T = int64_t(ids.size());
    Tensor g = test::poisoned(gpu, DType::BF16, {T, D}), c = cpu.alloc(DType::F32, {T, D});
    gpu.embedding(g, put_blocks(gpu, w, t, {V, D}), test::put_i32(gpu, ids, {T}), 0.5f);
    cpu.embedding(c, put_blocks(cpu, w, t, {V, D}), test::put_i32(cpu, ids, {T}), 0.5f);
    EXPECT_LT(test::rel_err_between(gpu, g, cpu, c), 4e-3);
  }
}

TEST(CudaBlockMoe, BlockExpertsMatchTheCpuTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  CpuBackend cpu;
  cpu.set_block_arithmetic(cpu::BlockArithmetic::Exact);
  std::mt19937 rng(9);
  const int64_t T = 37, D = 256, F = 512, E = 4, k = 2;
  // Q4_K_M's mix: gate|up in one type, down in another.
  for (auto [tg, td] : {std::pair{DType::Q4_K, DType::Q6_K}, {DType::Q8_0, DType::Q4_0}}) {
    SCOPED_TRACE(testing::Message() << dtype_name(tg) << " / " << dtype_name(td));
    const BlockWeight gu = random_weight(tg, E * 2 * F, D, rng),
                      dn = random_weight(td, E * D, F, rng);
    const std::vector<float> x = test::random_bf16(rng, size_t(T * D));
    std::vector<int32_t> ids(size_t(T * k));
    std::vector<float> weights(size_t(T * k));
    for (int64_t i = 0; i < T * k; i++) {
      ids[size_t(i)] = int32_t((i * 7 + i / k) % E);
      weights[size_t(i)] = 0.25f + 0.5f * float(i % k);
    }
    auto run = [&](Backend& be) {
      Tensor out = be.alloc(be.act_dtype(), {T, D});
      be.moe_experts(out, put(be, x, {T, D}), test::put_as(be, weights, {T, k}, DType::F32),
                     test::put_i32(be, ids, {T, k}), Linear{put_blocks(be, gu, tg, {E, 2 * F, D})},
                     Linear{put_blocks(be, dn, td, {E, D, F})}, Activation::SiLU);
      return test::to_vec(be, out);
    };
    EXPECT_LT(test::rel_err(run(gpu), run(cpu)), test::kBf16Tol);
  }
}

// gguf_moe_tiles() set for a scope (on again after it: the default).
struct MoeTilesSetting {
  explicit MoeTilesSetting(bool on) { set_gguf_moe_tiles(on); }
  ~MoeTilesSetting() { set_gguf_moe_tiles(true); }
};

// One routing of T tokens to k of E experts: ids [T, k], weights [T, k].
struct Routing {
  const char* what;
  int64_t T, E, k;
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

std::vector<Routing> odd_routings() {
  std::vector<Routing> r;
  // top-2: every token's first expert is 1 (100 slots: a whole and a partial row tile),
  // its second 0, 3 or 4; experts 2 and 5 get no tokens.
  r.push_back({"top-2, one expert takes every token, two none", 100, 6, 2, {}, {}});
  // top-8 of 17: every expert but 16 (none) gets ~19 slots.
  r.push_back({"top-8, one expert none", 40, 17, 8, {}, {}});
  // decode: one token, top-8 of 16 (eight one-slot tiles).
  r.push_back({"top-8, one token", 1, 16, 8, {}, {}});
  for (Routing& c : r)
    for (int64_t t = 0; t < c.T; t++)
      for (int64_t j = 0; j < c.k; j++) {
        const int32_t top2[3] = {3, 4, 0};
        c.ids.push_back(c.k == 2 ? (j == 0 ? 1 : top2[t % 3]) : int32_t((t + 2 * j) % 16));
        c.weights.push_back(0.1f + 0.8f * float(j + 1) / float(c.k * (c.k + 1) / 2));
      }
  return r;
}

// moe_experts of the routing on `be`: gate_up [E, 2F, D] of tg, down [E, D, F] of td.
std::vector<float> run_moe(Backend& be, const Routing& c, const std::vector<float>& x,
                           const BlockWeight& gu, DType tg, const BlockWeight& dn, DType td,
                           int64_t D, int64_t F) {
  Tensor out = be.alloc(be.act_dtype(), {c.T, D});
  be.moe_experts(out, put(be, x, {c.T, D}), test::put_as(be, c.weights, {c.T, c.k}, DType::F32),
                 test::put_i32(be, c.ids, {c.T, c.k}),
                 Linear{put_blocks(be, gu, tg, {c.E, 2 * F, D})},
                 Linear{put_blocks(be, dn, td, {c.E, D, F})}, Activation::SiLU);
  return test::to_vec(be, out);
}

// The grouped GEMMs on the shared-memory tiles (gguf_moe_tiles(), the default;
// cuda_moe_block_tiles.cu) on every type the dense tiles take (and Q4_K_M's Q4_K / Q6_K mix),
// against the CPU twin and the wmma kernels (the fallback, cuda_moe.cu): 256-value blocks
// with D = 768 (gate_up walks three K steps, both pipeline stages) and F = 256; 32-value
// blocks with D = 800 and F = 224 (down's 800 columns end in a partial 128-row tile,
// gate_up's 224 in a partial 64-column one, and both K end in a partial step). Routings:
// experts with no tokens, one with every token, top-2 and top-8, one token.
TEST(CudaBlockMoe, SharedMemoryTilesMatchTheCpuTwinAndTheWmmaKernels) {
  EXPECT_TRUE(gguf_moe_tiles()) << "the default (measured faster on an H100, issue 42)";
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  CpuBackend cpu;
  cpu.set_block_arithmetic(cpu::BlockArithmetic::Exact);
  std::mt19937 rng(14);
  std::vector<std::pair<DType, DType>> types;
  for (DType t : kTypes) types.push_back({t, t});
  types.push_back({DType::Q4_K, DType::Q6_K});
  for (const Routing& c : odd_routings())
    for (auto [tg, td] : types) {
      SCOPED_TRACE(testing::Message()
                   << dtype_name(tg) << " / " << dtype_name(td) << ", " << c.what);
      const bool k_quant = dtype_block(tg).elems == 256 || dtype_block(td).elems == 256;
      const int64_t D = k_quant ? 768 : 800, F = k_quant ? 256 : 224;
      const BlockWeight gu = random_weight(tg, c.E * 2 * F, D, rng),
                        dn = random_weight(td, c.E * D, F, rng);
      const std::vector<float> x = test::random_bf16(rng, size_t(c.T * D));
      const std::vector<float> got = run_moe(gpu, c, x, gu, tg, dn, td, D, F);
      EXPECT_LT(test::rel_err(got, run_moe(cpu, c, x, gu, tg, dn, td, D, F)), test::kBf16Tol);
      std::vector<float> wmma;
      {
        const MoeTilesSetting off(false);
        wmma = run_moe(gpu, c, x, gu, tg, dn, td, D, F);
      }
      // The same bf16 weights and rounding points: only the order of the f32 sums differs
      // (and the roundings of a, y and out it may flip).
      EXPECT_LT(test::rel_err(got, wmma), 4e-3);
    }
}

TEST(CudaBlockLinear, RefusesPartialBlocks) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::vector<uint8_t> bytes(4096);
  Linear l;
  l.weight = gpu.upload(Tensor::borrow(bytes.data(), DType::Q4_0, {8, 48}), DType::Q4_0);
  Tensor out = gpu.alloc(DType::F32, {1, 8});
  EXPECT_THROW(gpu.linear(out, gpu.zeros(DType::BF16, {1, 48}), l), Error);
}

}  // namespace cuda_block_linear_test
}  // namespace tandem
