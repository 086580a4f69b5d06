// The Hopper prefill kernel (wgmma, cuda_attention_prefill_sm90.cu) against the CPU twin
// and against the mma.sync kernel on the same inputs, on the cases it must cover: chunked
// prefill over a cached context next to decoding rows, ragged lengths and partially
// filled blocks, windows that cut a block (with the blocks before the window freed to
// -1), softcap, GQA 1..32, head dims 64 / 128 / 256 and padded ones (80, 96), block sizes
// 8 (one TMA box of 8 keys), 12 (not a power of two), 16, 64, 128 and 256 (blocks wider
// than a key tile), many query tiles per row, and a context of more than 32k keys. The
// producer is the one choose_sm90_loads picks for the case (TMA with the consumers'
// ping-pong; cp.async for e4m3, block size 12 and head dim 40). The rules that pick the
// kernel and the producer are checked on their own, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "attention_cases.h"
#include "backend/cuda/cuda_attention_prefill.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_attention_sm90_test {

using cuda::PrefillKernel;
using namespace test::attention;

// (tokens in the cache after the step, new tokens) per row, as in attention_cases.h.
const std::vector<AttnCase>& sm90_cases() {
  static const std::vector<AttnCase> all = {
      {"Llama shape, prefill from empty", 32, 8, 128, params(inv_sqrt(128)), {{700, 700}}},
      {"Llama shape, three prompts of odd lengths from empty",
       32,
       8,
       128,
       params(inv_sqrt(128)),
       {{1000, 1000}, {257, 257}, {77, 77}}},
      {"Llama shape, chunks over cached contexts next to decode rows",
       32,
       8,
       128,
       params(inv_sqrt(128)),
       {{3000, 200}, {1, 1}, {517, 77}, {2000, 1}, {130, 2}}},
      {"G8, d128, window 100 cuts blocks, ragged rows",
       16,
       2,
       128,
       params(inv_sqrt(128), 0.f, 100),
       {{1000, 300}, {101, 101}, {33, 5}, {500, 1}}},
      {"G2, d256, softcap 50 and window 1000",
       8,
       4,
       256,
       params(inv_sqrt(256), 50.f, 1000),
       {{2500, 260}, {70, 70}, {1500, 1}}},
      {"G4, d256, many query tiles", 8, 2, 256, params(inv_sqrt(256)), {{600, 600}, {66, 3}}},
      {"G8, d64, block size 12",
       8,
       1,
       64,
       params(inv_sqrt(64)),
       {{400, 150}, {13, 13}, {100, 1}},
       12},
      {"G1, d64, softcap 5", 4, 4, 64, params(1.f, 5.f), {{300, 129}, {17, 17}}},
      {"G4, d96 (padded to 128)", 8, 2, 96, params(inv_sqrt(96)), {{333, 120}, {64, 64}}},
      {"G2, d80 (padded to 128), window 64",
       4,
       2,
       80,
       params(inv_sqrt(80), 0.f, 64),
       {{400, 90}, {65, 65}}},
      {"G32, d128: 4 tokens per tile", 32, 1, 128, params(inv_sqrt(128)), {{260, 37}, {50, 1}}},
      {"G4, d128, block size 64", 8, 2, 128, params(inv_sqrt(128)), {{900, 333}, {64, 64}}, 64},
      {"G4, d128, block size 256 (wider than a key tile)",
       8,
       2,
       128,
       params(inv_sqrt(128)),
       {{700, 300}, {257, 3}},
       256},
      {"G2, d128, 2000 new tokens: 32 query tiles",
       2,
       1,
       128,
       params(inv_sqrt(128)),
       {{2000, 2000}}},
      {"G4, d128, block size 8, window 50 (tiles start mid-block)",
       8,
       2,
       128,
       params(inv_sqrt(128), 0.f, 50),
       {{600, 200}, {9, 9}, {300, 1}},
       8},
      {"G2, d256, block size 128 (two key tiles a block), window 300",
       4,
       2,
       256,
       params(inv_sqrt(256), 0.f, 300),
       {{1000, 400}, {129, 129}, {70, 3}},
       128},
  };
  return all;
}

// write_kv then attention on one backend; the output on the host (GPU outputs start NaN).
// f8_cache: the GPU cache holds e4m3 (write_kv rounds the new rows on the device).
std::vector<float> attend(Backend& be, const AttnCase& c, const HostAttnStep& s, const AttnData& d,
                          bool f8_cache = false) {
  const StepTensors step = upload_step(be, s, c);
  const int64_t T = step.num_tokens, NB = s.num_blocks;
  const Shape shape{NB, c.block_size, c.Hkv, c.Dh};
  const DType cache_dtype = f8_cache ? DType::F8E4M3 : be.act_dtype();
  PagedKv cache{test::put_as(be, d.k_cache, shape, cache_dtype),
                test::put_as(be, d.v_cache, shape, cache_dtype)};
  be.write_kv(cache, test::put(be, d.k_new, {T, c.Hkv, c.Dh}),
              test::put(be, d.v_new, {T, c.Hkv, c.Dh}), step);
  const Tensor q = test::put(be, d.q, {T, c.Hq, c.Dh});
  Tensor out = be.device() == Device::CUDA ? test::poisoned(be, DType::BF16, {T, c.Hq, c.Dh})
                                           : be.alloc(be.act_dtype(), {T, c.Hq, c.Dh});
  be.attention(out, q, cache, step, c.params);
  return test::to_vec(be, out);
}

// The backend's prefill kernel switch (CudaOptions::sm90_prefill).
void set_sm90_prefill(CudaBackend& be, bool on) {
  CudaOptions options = be.options();
  options.sm90_prefill = on;
  be.set_options(options);
}

// Every cache value and new K/V row rounded through e4m3 (what an e4m3 cache holds).
AttnData through_f8(AttnData d) {
  for (auto* v : {&d.k_cache, &d.v_cache, &d.k_new, &d.v_new})
    for (float& x : *v) x = f8e4m3_to_f32(f32_to_f8e4m3(x));
  return d;
}

// d with NaN in every cache slot no prefill query can see: slots past a row's context
// (the tail of its last block), before its window, and in blocks no row owns. Decode
// rows' blocks stay as they are (the decode kernel is not under test here). A kernel that
// multiplies such a slot by P = 0 (TMA fills whole boxes) would turn O into NaN.
AttnData with_hidden_nan(const AttnCase& c, const HostAttnStep& s, AttnData d) {
  std::vector<bool> keep(size_t(s.num_blocks) * size_t(c.block_size), false);
  for (size_t b = 0; b < c.rows.size(); b++) {
    const auto [ctx, n] = c.rows[b];
    const int first = c.params.window > 0 ? std::max(0, ctx - n - c.params.window + 1) : 0;
    const int32_t* table = s.h.block_table.data() + b * size_t(s.max_blocks);
    for (int i = 0; i < s.max_blocks; i++) {
      if (table[i] < 0) continue;
      for (int o = 0; o < c.block_size; o++) {
        const int p = i * c.block_size + o;
        if (n < 2 || (p >= first && p < ctx)) keep[size_t(table[i]) * c.block_size + o] = true;
      }
    }
  }
  const size_t per_slot = size_t(c.Hkv) * size_t(c.Dh);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t slot = 0; slot < keep.size(); slot++)
    if (!keep[slot])
      for (auto* v : {&d.k_cache, &d.v_cache})
        std::fill_n(v->begin() + long(slot * per_slot), per_slot, nan);
  return d;
}

// The CPU twin, the sm90 kernel and the mma.sync kernel on one case's inputs: every GPU
// answer matches the twin, and the sm90 ones the mma.sync one.
// With an e4m3 cache the twin runs on the e4m3-rounded values; with hidden_nan the GPU
// kernels get with_hidden_nan's cache, the twin the clean one (the same answer).
void compare_kernels(test::Backends& be, const AttnCase& c, uint32_t seed, bool f8 = false,
                     bool hidden_nan = false) {
  std::mt19937 rng(seed);
  const HostAttnStep s = make_host_step(c, rng);
  const AttnData clean = random_data(c, s, rng);
  const std::vector<float> want = attend(*be.cpu, c, s, f8 ? through_f8(clean) : clean);
  const AttnData d = hidden_nan ? with_hidden_nan(c, s, clean) : clean;
  set_sm90_prefill(*be.gpu, false);
  const std::vector<float> mma = attend(*be.gpu, c, s, d, f8);
  set_sm90_prefill(*be.gpu, true);
  {
    SCOPED_TRACE("mma.sync kernel vs the CPU twin");
    expect_output(mma, want, c);
  }
  const int64_t num_slots = int64_t(s.num_blocks) * c.block_size;
  ASSERT_EQ(cuda::choose_prefill_kernel(c.Dh, f8, be.gpu->props(), true), PrefillKernel::Sm90);
  const cuda::Sm90Loads loads = cuda::choose_sm90_loads(f8, c.Dh, c.block_size, num_slots);
  SCOPED_TRACE(testing::Message() << "sm90 kernel (" << cuda::sm90_loads_name(loads)
                                  << ") vs the CPU twin and the mma.sync kernel");
  const std::vector<float> sm90 = attend(*be.gpu, c, s, d, f8);
  expect_output(sm90, want, c);
  EXPECT_LE(test::rel_err(sm90, mma), test::kBf16Tol) << "sm90 vs mma.sync kernel";
}

TEST(CudaAttentionSm90, TheRuleNamesTheKernel) {
  cudaDeviceProp h200{};
  h200.major = 9;
  h200.sharedMemPerBlockOptin = 232448;  // 227 KB
  for (int d : {40, 64, 80, 96, 128, 200, 256})
    EXPECT_EQ(cuda::choose_prefill_kernel(d, false, h200, true), PrefillKernel::Sm90)
        << "head dim " << d;
  for (int d : {16, 32, 264, 512})
    EXPECT_EQ(cuda::choose_prefill_kernel(d, false, h200, true), PrefillKernel::Mma)
        << "head dim " << d;
  for (int d : {64, 128})
    EXPECT_EQ(cuda::choose_prefill_kernel(d, true, h200, true), PrefillKernel::Sm90)
        << "e4m3, d" << d;
  EXPECT_EQ(cuda::choose_prefill_kernel(256, true, h200, true), PrefillKernel::Mma)
      << "e4m3 at d256: the staging tile does not fit";
  cudaDeviceProp small = h200;
  small.sharedMemPerBlockOptin = 150 * 1024;  // holds d64's ring, not d128's
  EXPECT_EQ(cuda::choose_prefill_kernel(64, false, small, true), PrefillKernel::Sm90);
  EXPECT_EQ(cuda::choose_prefill_kernel(128, false, small, true), PrefillKernel::Mma);
  for (int major : {8, 10, 12}) {
    cudaDeviceProp other = h200;
    other.major = major;
    EXPECT_EQ(cuda::choose_prefill_kernel(128, false, other, true), PrefillKernel::Mma)
        << "sm " << major;
  }
  EXPECT_EQ(cuda::choose_prefill_kernel(128, false, h200, false), PrefillKernel::Mma)
      << "switched off";
}

TEST(CudaAttentionSm90, TheRuleNamesTheProducer) {
  using cuda::Sm90Loads;
  constexpr int64_t kSlots = 1 << 20;
  for (int bs : {8, 16, 64, 128, 256})
    EXPECT_EQ(cuda::choose_sm90_loads(false, 128, bs, kSlots), Sm90Loads::Tma) << "block " << bs;
  for (int d : {64, 80, 96, 256})
    EXPECT_EQ(cuda::choose_sm90_loads(false, d, 16, kSlots), Sm90Loads::Tma) << "head dim " << d;
  for (int bs : {1, 4, 12, 24})
    EXPECT_EQ(cuda::choose_sm90_loads(false, 128, bs, kSlots), Sm90Loads::CpAsync)
        << "block " << bs;
  EXPECT_EQ(cuda::choose_sm90_loads(true, 128, 16, kSlots), Sm90Loads::CpAsync) << "e4m3";
  EXPECT_EQ(cuda::choose_sm90_loads(false, 40, 16, kSlots), Sm90Loads::CpAsync)
      << "head dim 40: narrower than one box";
  EXPECT_EQ(cuda::choose_sm90_loads(false, 100, 16, kSlots), Sm90Loads::CpAsync)
      << "rows of 200 bytes: not whole 16-byte chunks";
  EXPECT_EQ(cuda::choose_sm90_loads(false, 128, 16, int64_t(1) << 31), Sm90Loads::CpAsync)
      << "slots past int32 coordinates";
}

TEST(CudaAttentionSm90, MatchesTheCpuTwinAndTheMmaKernel) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const bool hopper = be.gpu->props().major == 9;
  if (!hopper) GTEST_SKIP() << "the sm90 kernel runs on sm_90 devices only";
  for (uint32_t seed : test::test_seeds()) {
    for (const AttnCase& c : sm90_cases()) {
      SCOPED_TRACE(testing::Message() << c.name << ", " << test::seed_trace(seed));
      compare_kernels(be, c, seed);
    }
  }
}

// NaN in every cache slot no query sees (with_hidden_nan) leaves every kernel's answer
// alone, one seed. (The CPU twin too: checked once, 0 NaN out on every case.)
TEST(CudaAttentionSm90, HiddenNanSlotsStayOut) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  if (be.gpu->props().major != 9) GTEST_SKIP() << "the sm90 kernel runs on sm_90 devices only";
  for (const AttnCase& c : sm90_cases()) {
    SCOPED_TRACE(c.name);
    compare_kernels(be, c, 5, false, true);
  }
}

// The e4m3 cache on the cases the sm90 kernel takes with it (whole 16-byte chunks per
// head, d <= 128), one seed.
TEST(CudaAttentionSm90, E4m3CacheMatchesTheCpuTwinAndTheMmaKernel) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  if (be.gpu->props().major != 9) GTEST_SKIP() << "the sm90 kernel runs on sm_90 devices only";
  for (const AttnCase& c : sm90_cases()) {
    if (c.Dh % 16 != 0 || c.Dh > 128) continue;
    SCOPED_TRACE(c.name);
    compare_kernels(be, c, 3, true);
  }
}

// A chunk of 64 new tokens at the end of a 33,000-token context (> 32k keys: 258 key
// tiles, counts past 2^15), one seed: the CPU twin is the slow part.
TEST(CudaAttentionSm90, LongContextMatches) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  if (be.gpu->props().major != 9) GTEST_SKIP() << "the sm90 kernel runs on sm_90 devices only";
  const AttnCase c{"G4, d128, 64 tokens over 33k keys",
                   4,
                   1,
                   128,
                   params(inv_sqrt(128)),
                   {{33000, 64}, {40000, 1}}};
  compare_kernels(be, c, 7);
}

}  // namespace cuda_attention_sm90_test
}  // namespace tandem
