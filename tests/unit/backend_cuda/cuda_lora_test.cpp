// CudaBackend::lora_add (cuda_lora.cu) against its CPU twin (cpu_lora.cpp) on random bf16
// inputs: tokens of mixed slots in any order (slot-0 rows must come back bit for bit), the
// tensor-core, vector and scalar paths (K and R multiples of 32, 8 or not), 1 to 300 tokens,
// tiles of 8 sorted tokens that straddle adapters, ranks up to a
// fused projection's, K in several slices, fused projections read shard by shard (B
// block-diagonal, as the loader writes it); and a captured CUDA graph replayed with other
// slots, other adapters written into the bank and more or fewer adapter rows than at capture.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_test_util.h"

namespace tandem {
namespace cuda_lora_test {

struct LoraCase {
  const char* name;
  int64_t S, R, K, N, T;
  std::vector<int64_t> shard_ends = {};  // a fused projection's (LinearLora::shard_ends)
};

struct LoraData {
  std::vector<float> x, y, a, b;
  std::vector<int32_t> slots;
};

LoraData random_data(const LoraCase& c, std::mt19937& rng) {
  LoraData d;
  d.x = test::random_bf16(rng, size_t(c.T * c.K));
  d.y = test::random_bf16(rng, size_t(c.T * c.N));
  d.a = test::random_bf16(rng, size_t(c.S * c.R * c.K), -0.1f, 0.1f);
  d.b = test::random_bf16(rng, size_t(c.S * c.N * c.R), -0.1f, 0.1f);
  // A fused projection's B is block-diagonal: shard j's rows only in its columns of R.
  const int64_t shards = int64_t(c.shard_ends.size()), rank = shards ? c.R / shards : c.R;
  for (int64_t s = 0, j = 0; s < c.S; s++, j = 0)
    for (int64_t n = 0; n < c.N; n++) {
      while (shards && n >= c.shard_ends[size_t(j)]) j++;
      for (int64_t r = 0; r < c.R; r++)
        if (shards && r / rank != j) d.b[size_t((s * c.N + n) * c.R + r)] = 0.f;
    }
  std::uniform_int_distribution<int32_t> slot(0, int32_t(c.S) - 1);
  for (int64_t t = 0; t < c.T; t++) d.slots.push_back(slot(rng));
  return d;
}

// tiled = false leaves LoraRows::tiles out, which keeps every shape on the CUDA-core kernels.
LoraRows rows_on(Backend& be, const std::vector<int32_t>& slots, bool tiled = true) {
  const int64_t T = int64_t(slots.size());
  LoraRows rows{be.alloc(DType::I32, {T}), be.alloc(DType::I32, {T}), be.alloc(DType::I32, {T}),
                be.alloc(DType::I32, {1})};
  if (tiled) rows.tiles = be.alloc(DType::I32, {1 + tandem::kLoraTileInts * T});
  write_lora_rows(be, rows, slots);
  return rows;
}

// out after lora_add on `be` (its activation dtype), as floats.
std::vector<float> run(Backend& be, const LoraCase& c, const LoraData& d, bool tiled = true) {
  LinearLora lora{test::put(be, d.a, {c.S, c.R, c.K}), test::put(be, d.b, {c.S, c.N, c.R}),
                  c.shard_ends};
  Tensor out = test::put(be, d.y, {c.T, c.N});
  be.lora_add(out, test::put(be, d.x, {c.T, c.K}), lora, rows_on(be, d.slots, tiled));
  return test::to_vec(be, out);
}

void expect_matches(const std::vector<float>& gpu, const std::vector<float>& cpu, const LoraCase& c,
                    const LoraData& d) {
  // The GPU writes y + delta rounded to bf16, the CPU keeps it in f32: each GPU value must
  // be within one bf16 step of the CPU's (plus 1e-3 of the delta for summation order).
  // The delta itself, read back through that rounding, is off by up to half a step of y
  // (~3% of a rank-5 delta on the first H200 run), so it is only checked for gross errors.
  std::vector<float> dg(gpu.size()), dc(cpu.size());
  for (size_t i = 0; i < gpu.size(); i++) dg[i] = gpu[i] - d.y[i], dc[i] = cpu[i] - d.y[i];
  EXPECT_LE(test::rel_err(dg, dc), 0.1);
  int far = 0;
  for (size_t i = 0; i < gpu.size(); i++) {
    const float v = std::fabs(cpu[i]);
    const float step = v > 0.f ? std::ldexp(1.f, std::ilogb(v) - 7) : 0.f;
    if (std::fabs(gpu[i] - cpu[i]) > step + 1e-3f * std::fabs(dc[i]) + 1e-6f) far++;
  }
  EXPECT_EQ(far, 0) << "values more than one bf16 step from the CPU twin's";
  for (int64_t t = 0; t < c.T; t++) {
    if (d.slots[size_t(t)] != 0) continue;
    for (int64_t n = 0; n < c.N; n++)
      ASSERT_EQ(gpu[size_t(t * c.N + n)], d.y[size_t(t * c.N + n)]) << "base token " << t;
  }
}

TEST(CudaLora, MatchesTheCpuTwin) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const LoraCase cases[] = {
      {"decode, rank 16", 9, 16, 256, 192, 64},
      {"one token", 3, 8, 128, 64, 1},
      {"fused qkv, rank 3x16", 5, 48, 512, 768, 37},
      {"fused qkv read by shard", 5, 48, 512, 768, 37, {512, 640, 768}},
      {"fused gate|up read by shard, K in 5 slices", 4, 32, 2304, 512, 70, {256, 512}},
      {"shards on the scalar path", 3, 10, 40, 24, 9, {16, 24}},
      {"prefill", 3, 16, 256, 128, 300},
      {"scalar paths", 4, 6, 37, 29, 19},
      {"odd rank, even K", 4, 5, 64, 80, 12},
      // The tensor-core kernels (cuda_lora_mma.cu) beside the CUDA-core ones: each shrink
      // with each expand, a rank that is no multiple of 16, and two groups of 64 ranks.
      {"tensor-core shrink, CUDA-core expand (N % 16 != 0)", 5, 16, 96, 200, 41},
      {"CUDA-core shrink (K % 32 != 0), tensor-core expand", 5, 16, 40, 64, 41},
      {"rank 12 on the tensor cores", 4, 12, 64, 48, 23},
      {"fused, two shards of rank 48", 4, 96, 512, 256, 50, {128, 256}},
  };
  for (const LoraCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(17);
    LoraData d = random_data(c, rng);
    const std::vector<float> cpu = run(*be.cpu, c, d);
    for (bool tiled : {true, false}) {
      SCOPED_TRACE(tiled ? "with the step's tiles" : "without tiles: CUDA cores");
      expect_matches(run(*be.gpu, c, d, tiled), cpu, c, d);
    }
    d.slots.assign(size_t(c.T), 0);  // no adapter row at all: out untouched
    EXPECT_EQ(run(*be.gpu, c, d), d.y);
  }
}

TEST(CudaLora, GraphReplaysReadTheRowsAndBanksOfEachStep) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const LoraCase c{"graph", 5, 16, 256, 192, 24};
  std::mt19937 rng(23);
  LoraData d = random_data(c, rng);
  LinearLora lora{test::put(*be.gpu, d.a, {c.S, c.R, c.K}),
                  test::put(*be.gpu, d.b, {c.S, c.N, c.R})};
  Tensor x = test::put(*be.gpu, d.x, {c.T, c.K});
  Tensor y0 = test::put(*be.gpu, d.y, {c.T, c.N});
  Tensor out = be.gpu->alloc(DType::BF16, {c.T, c.N});
  LoraRows rows = rows_on(*be.gpu, d.slots);
  be.gpu->copy(out, y0);
  be.gpu->lora_add(out, x, lora, rows);  // eager warm-up
  be.gpu->synchronize();
  be.gpu->capture_begin();
  be.gpu->lora_add(out, x, lora, rows);
  const std::shared_ptr<void> graph = be.gpu->capture_end();
  for (int replay = 0; replay < 4; replay++) {
    SCOPED_TRACE(testing::Message() << "replay " << replay);
    std::uniform_int_distribution<int32_t> slot(0, int32_t(c.S) - 1);
    for (int32_t& s : d.slots) s = replay == 3 ? 0 : slot(rng);  // the last: no adapter rows
    if (replay == 2) d.slots.assign(size_t(c.T), 4);             // every row one adapter
    d.a = test::random_bf16(rng, d.a.size(), -0.1f, 0.1f);       // new adapters in the bank
    d.b = test::random_bf16(rng, d.b.size(), -0.1f, 0.1f);
    Tensor a = test::put(*be.gpu, d.a, {c.S, c.R, c.K}),
           b = test::put(*be.gpu, d.b, {c.S, c.N, c.R});
    be.gpu->copy(lora.a, a);
    be.gpu->copy(lora.b, b);
    write_lora_rows(*be.gpu, rows, d.slots);
    be.gpu->copy(out, y0);
    be.gpu->replay(graph);
    expect_matches(test::to_vec(*be.gpu, out), run(*be.cpu, c, d), c, d);
  }
}

}  // namespace cuda_lora_test
}  // namespace tandem
