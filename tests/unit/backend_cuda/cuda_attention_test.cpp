// CUDA write_kv and paged attention against the CPU twin on fresh random inputs: shuffled
// (non-contiguous) block tables, rows of different lengths, decode-only steps (one token
// per row, the flash-decoding kernel) and mixed steps (prefill rows on the tensor-core
// kernel next to decoding rows), GQA groups 1..32, sliding window, softcap, head dims
// 16..512, block sizes that are and are not powers of two. Blocks a windowed row no longer
// reads are replaced by -1 in its table (a freed block must never be read), and GPU
// outputs start as NaN so a token the kernels skip fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "../backend/step_builder.h"
#include "attention_cases.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_attention_test {

using test::kBf16Tol;
using namespace test::attention;

// write_kv then attention on one backend; returns (cache k, cache v, out) on the host.
struct AttnResult {
  std::vector<float> k, v, out;
};

AttnResult run(Backend& be, const AttnCase& c, const HostAttnStep& s, const AttnData& d,
               const StepTensors& step) {
  const int64_t T = step.num_tokens, NB = s.num_blocks;
  PagedKv cache{test::put(be, d.k_cache, {NB, c.block_size, c.Hkv, c.Dh}),
                test::put(be, d.v_cache, {NB, c.block_size, c.Hkv, c.Dh})};
  be.write_kv(cache, test::put(be, d.k_new, {T, c.Hkv, c.Dh}),
              test::put(be, d.v_new, {T, c.Hkv, c.Dh}), step);
  Tensor q = test::put(be, d.q, {T, c.Hq, c.Dh});
  Tensor out = be.device() == Device::CUDA ? test::poisoned(be, DType::BF16, {T, c.Hq, c.Dh})
                                           : be.alloc(be.act_dtype(), {T, c.Hq, c.Dh});
  be.attention(out, q, cache, step, c.params);
  return {test::to_vec(be, cache.k), test::to_vec(be, cache.v), test::to_vec(be, out)};
}

void expect_close(const AttnResult& gpu, const AttnResult& cpu, const AttnCase& c) {
  EXPECT_EQ(gpu.k, cpu.k) << "write_kv: K cache differs";
  EXPECT_EQ(gpu.v, cpu.v) << "write_kv: V cache differs";
  EXPECT_LE(test::rel_err(gpu.out, cpu.out), kBf16Tol) << "attention output";
  EXPECT_LE(worst_token_err(gpu.out, cpu.out, size_t(c.Hq) * c.Dh), 2 * kBf16Tol)
      << "worst token of the attention output";
}

TEST(CudaAttention, WriteKvAndAttentionMatchCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    for (const AttnCase& c : cases()) {
      SCOPED_TRACE(testing::Message() << c.name << ", " << test::seed_trace(seed));
      std::mt19937 rng(seed);
      const HostAttnStep s = make_host_step(c, rng);
      const AttnData d = random_data(c, s, rng);
      const AttnResult cpu = run(*be.cpu, c, s, d, upload_step(*be.cpu, s, c));
      const AttnResult gpu = run(*be.gpu, c, s, d, upload_step(*be.gpu, s, c));
      expect_close(gpu, cpu, c);
    }
  }
}

// A graph replay passes its capacity: max_blocks and max_context_len larger than the
// step's rows. The kernels must read the real lengths from the device.
TEST(CudaAttention, UpperBoundsLargerThanTheRowsGiveTheSameAnswer) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (size_t i : {size_t(0), size_t(1), size_t(2), size_t(6), size_t(8)}) {
    const AttnCase& c = cases()[i];
    SCOPED_TRACE(c.name);
    std::mt19937 rng(77);
    const HostAttnStep s = make_host_step(c, rng);
    const AttnData d = random_data(c, s, rng);
    const AttnResult cpu = run(*be.cpu, c, s, d, upload_step(*be.cpu, s, c));
    const AttnResult exact = run(*be.gpu, c, s, d, upload_step(*be.gpu, s, c));
    const AttnResult wide = run(*be.gpu, c, s, d, upload_step(*be.gpu, s, c, 37, 6000));
    expect_close(wide, cpu, c);
    EXPECT_LE(test::rel_err(wide.out, exact.out), kBf16Tol);
  }
}

// Every decode shape at its exact bounds and at a replayed graph's capacity
// (max_context_len 131072 and a block table that wide, real rows of 1..5000 tokens):
// both must match the CPU twin, and each other.
TEST(CudaAttention, DecodeShapesMatchCpuAtExactAndCapacityBounds) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  constexpr int kCapacity = 131072;
  for (uint32_t seed : test::test_seeds()) {
    for (const AttnCase& c : decode_cases()) {
      SCOPED_TRACE(testing::Message() << c.name << ", " << test::seed_trace(seed));
      std::mt19937 rng(seed);
      const HostAttnStep s = make_host_step(c, rng);
      const AttnData d = random_data(c, s, rng);
      const int extra_blocks = kCapacity / c.block_size - s.max_blocks;
      ASSERT_GE(extra_blocks, 0);
      const AttnResult cpu = run(*be.cpu, c, s, d, upload_step(*be.cpu, s, c));
      const AttnResult exact = run(*be.gpu, c, s, d, upload_step(*be.gpu, s, c));
      const AttnResult wide = run(
          *be.gpu, c, s, d, upload_step(*be.gpu, s, c, extra_blocks, kCapacity - s.max_context));
      expect_close(exact, cpu, c);
      expect_close(wide, cpu, c);
      EXPECT_LE(test::rel_err(wide.out, exact.out), kBf16Tol);
    }
  }
}

// Shapes whose decode items span several live splits at a graph's capacity bounds (the
// splits merge inside the decode kernel, on arrival counters; live counts below are for
// an H200's 132 SMs): batch 1 with 5, 18 and 63 live splits (the merge loads 16
// partials at a time: one partial batch, then four with a partial last one), 16 heads
// per CTA, two head groups, Dh 256 with softcap and window (16 live: one full batch),
// Dh 512, a mixed step (by_row: counters indexed by row) and a verify step (rows of a few
// tokens: counters indexed by token); 1-key rows next to long ones (one live split among
// many launched: written directly, never counted).
const std::vector<AttnCase>& merge_cases() {
  static const std::vector<AttnCase> all = {
      {"B=1, Llama shape, ctx 300", 32, 8, 128, params(inv_sqrt(128)), {{300, 1}}},
      {"B=1, Llama shape, ctx 1100", 32, 8, 128, params(inv_sqrt(128)), {{1100, 1}}},
      {"B=1, G16, d128, ctx 8000", 32, 2, 128, params(inv_sqrt(128)), {{8000, 1}}},
      {"G32, d64, two head groups", 32, 1, 64, params(inv_sqrt(64)), {{700, 1}, {3, 1}}},
      {"G2, d256, softcap, window 1000",
       8,
       4,
       256,
       params(inv_sqrt(256), 50.f, 1000),
       {{3000, 1}, {1, 1}, {1064, 1}}},
      {"G4, d512", 4, 1, 512, params(inv_sqrt(512)), {{900, 1}, {65, 1}}},
      // T > 8·B: the prefill kernel beside by_row decode (fewer tokens would all decode).
      {"mixed, Llama shape", 32, 8, 128, params(inv_sqrt(128)), {{2000, 1}, {50, 30}, {1, 1}}},
      // A verify step: every token on the decode kernel, counters indexed by token.
      {"verify, Llama shape, ctx 3000", 32, 8, 128, params(inv_sqrt(128)), {{3000, 5}, {1, 1}}},
  };
  return all;
}

// One step's inputs on the GPU at capacity bounds, written once and attended many times.
struct GpuAttnStep {
  StepTensors step;
  PagedKv cache;
  Tensor q, out, poison;
};

GpuAttnStep prepare_gpu_step(Backend& gpu, const AttnCase& c, const HostAttnStep& s,
                             const AttnData& d, int capacity) {
  GpuAttnStep g;
  g.step = upload_step(gpu, s, c, capacity / c.block_size - s.max_blocks, capacity - s.max_context);
  const int64_t T = g.step.num_tokens, NB = s.num_blocks;
  g.cache = {test::put(gpu, d.k_cache, {NB, c.block_size, c.Hkv, c.Dh}),
             test::put(gpu, d.v_cache, {NB, c.block_size, c.Hkv, c.Dh})};
  gpu.write_kv(g.cache, test::put(gpu, d.k_new, {T, c.Hkv, c.Dh}),
               test::put(gpu, d.v_new, {T, c.Hkv, c.Dh}), g.step);
  g.q = gpu.alloc(DType::BF16, {T, c.Hq, c.Dh});
  g.out = gpu.alloc(DType::BF16, {T, c.Hq, c.Dh});
  g.poison = test::poisoned(gpu, DType::BF16, {T, c.Hq, c.Dh});
  return g;
}

// The merge's arrival counters must be back at zero after every launch, and the last
// split must read this launch's partials: launches on one backend alternate two query
// sets (a stale count leaves NaN or merges early; a stale partial gives the other set's
// answer), eagerly and then as replays of a captured CUDA graph, shapes interleaved.
TEST(CudaAttention, FusedSplitMergeSurvivesRepeatedLaunchesAndGraphReplays) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  constexpr int kCapacity = 131072, kLaunches = 4;
  for (const AttnCase& c : merge_cases()) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(321);
    const HostAttnStep s = make_host_step(c, rng);
    AttnData d[2] = {random_data(c, s, rng), {}};
    d[1] = d[0];
    d[1].q = test::random_bf16(rng, d[0].q.size());
    std::vector<float> want[2];
    for (int k = 0; k < 2; k++) want[k] = run(*be.cpu, c, s, d[k], upload_step(*be.cpu, s, c)).out;
    GpuAttnStep g = prepare_gpu_step(*be.gpu, c, s, d[0], kCapacity);
    const int64_t T = g.step.num_tokens;
    const Tensor qs[2] = {test::put(*be.gpu, d[0].q, {T, c.Hq, c.Dh}),
                          test::put(*be.gpu, d[1].q, {T, c.Hq, c.Dh})};
    auto attend = [&] { be.gpu->attention(g.out, g.q, g.cache, g.step, c.params); };
    for (int i = 0; i < kLaunches; i++) {
      SCOPED_TRACE(testing::Message() << "eager launch " << i);
      be.gpu->copy(g.q, qs[i % 2]);
      be.gpu->copy(g.out, g.poison);
      attend();
      expect_output(test::to_vec(*be.gpu, g.out), want[i % 2], c);
    }
    be.gpu->synchronize();
    be.gpu->capture_begin();
    attend();
    attend();  // back to back, as layers are
    const std::shared_ptr<void> graph = be.gpu->capture_end();
    for (int i = 0; i < kLaunches; i++) {
      SCOPED_TRACE(testing::Message() << "graph replay " << i);
      be.gpu->copy(g.q, qs[(i + 1) % 2]);
      be.gpu->copy(g.out, g.poison);
      be.gpu->replay(graph);
      expect_output(test::to_vec(*be.gpu, g.out), want[(i + 1) % 2], c);
    }
  }
}

// Verify steps (speculative decoding): rows of 1..8 new tokens each, on both routes: every
// token on the decode kernel (CudaOptions::verify_decode_kernel, the default;
// cuda_attention.cu), and the prefill kernel for rows of several tokens (the option off),
// causal within each row's chunk. Against
// the CPU twin, at exact and at a graph's capacity bounds; the GPU output starts as NaN,
// so a token the kernel skipped fails. Cases: batch 1 with two tokens (the few-token
// kernel must not load a chunk's keys early), T far above B + 1 (tokens past the rows'
// start indices), windows, GQA 1..16, Dh 64..256.
TEST(CudaAttention, VerifyStepsOnTheDecodeKernelMatchCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;  // its GPU routes rows of 2..8 tokens to the decode kernel
  auto on_prefill = std::make_unique<CudaBackend>(0, CudaOptions{.verify_decode_kernel = false});
  const std::vector<AttnCase> verify = {
      {"verify, batch 1, K = 1", 32, 8, 128, params(inv_sqrt(128)), {{100, 2}}},
      {"verify, batch 1, K = 7, long context", 32, 8, 128, params(inv_sqrt(128)), {{3000, 8}}},
      {"verify, rows of 1..8",
       16,
       4,
       64,
       params(inv_sqrt(64)),
       {{300, 5}, {1, 1}, {2000, 5}, {17, 3}, {64, 8}, {8, 8}, {129, 1}}},
      {"verify, G1, d256, softcap, window 50",
       4,
       4,
       256,
       params(inv_sqrt(256), 30.f, 50),
       {{700, 4}, {51, 4}, {5, 2}}},
      {"verify, G16, d128, block size 12",
       16,
       1,
       128,
       params(inv_sqrt(128)),
       {{500, 6}, {13, 2}, {2, 2}},
       12},
  };
  for (uint32_t seed : test::test_seeds())
    for (const AttnCase& c : verify) {
      SCOPED_TRACE(testing::Message() << c.name << ", " << test::seed_trace(seed));
      std::mt19937 rng(seed);
      const HostAttnStep s = make_host_step(c, rng);
      const AttnData d = random_data(c, s, rng);
      int tokens = 0;
      for (auto [ctx, n] : c.rows) tokens += n;
      ASSERT_LE(tokens, 8 * int(c.rows.size())) << "the case would take the prefill kernel";
      const AttnResult cpu = run(*be.cpu, c, s, d, upload_step(*be.cpu, s, c));
      for (CudaBackend* gpu : {be.gpu.get(), on_prefill.get()}) {  // the two routes
        SCOPED_TRACE(gpu->options().verify_decode_kernel ? "decode kernel" : "prefill kernel");
        const AttnResult exact = run(*gpu, c, s, d, upload_step(*gpu, s, c));
        const AttnResult wide = run(*gpu, c, s, d, upload_step(*gpu, s, c, 300, 9000));
        expect_close(exact, cpu, c);
        expect_close(wide, cpu, c);
      }
    }
}

TEST(CudaAttention, WriteKvSkipsNegativeSlots) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(5);
  const int64_t NB = 3, BS = 16, Hkv = 2, Dh = 64;
  const auto cache_init = test::random_bf16(rng, size_t(NB * BS * Hkv * Dh));
  const auto k_new = test::random_bf16(rng, size_t(3 * Hkv * Dh));
  PagedKv cache{test::put(*be.gpu, cache_init, {NB, BS, Hkv, Dh}),
                test::put(*be.gpu, cache_init, {NB, BS, Hkv, Dh})};
  StepTensors step;
  step.num_tokens = 3;
  step.block_size = int(BS);
  step.groups = {{.slot_map = test::put_i32(*be.gpu, {17, -1, 40}, {3})}};
  Tensor k = test::put(*be.gpu, k_new, {3, Hkv, Dh});
  be.gpu->write_kv(cache, k, k, step);
  std::vector<float> want = cache_init;
  const size_t row = size_t(Hkv * Dh);
  std::copy_n(k_new.begin(), row, want.begin() + 17 * long(row));
  std::copy_n(k_new.begin() + 2 * long(row), row, want.begin() + 40 * long(row));
  EXPECT_EQ(test::to_vec(*be.gpu, cache.k), want);
  EXPECT_EQ(test::to_vec(*be.gpu, cache.v), want);
}

TEST(CudaAttention, RejectsBadShapes) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const AttnCase& c = cases()[0];
  std::mt19937 rng(9);
  const HostAttnStep s = make_host_step(c, rng);
  StepTensors step = upload_step(*be.gpu, s, c);
  const int64_t T = step.num_tokens;
  PagedKv cache{be.gpu->zeros(DType::BF16, {s.num_blocks, 16, c.Hkv, c.Dh}),
                be.gpu->zeros(DType::BF16, {s.num_blocks, 16, c.Hkv, c.Dh})};
  Tensor q = be.gpu->zeros(DType::BF16, {T, c.Hq, c.Dh});
  Tensor out = be.gpu->alloc(DType::BF16, {T, c.Hq, c.Dh});
  Tensor q3 = be.gpu->zeros(DType::BF16, {T, 3, c.Dh}),
         out3 = be.gpu->alloc(DType::BF16, {T, 3, c.Dh});
  EXPECT_THROW(be.gpu->attention(out3, q3, cache, step, c.params), Error);  // 3 % 4 heads
  Tensor qf = be.gpu->zeros(DType::F32, {T, c.Hq, c.Dh});
  EXPECT_THROW(be.gpu->attention(out, qf, cache, step, c.params), Error);  // f32 q
  EXPECT_THROW(be.gpu->attention(q, q, cache, step, c.params), Error);     // out aliases q
  PagedKv big{be.gpu->zeros(DType::BF16, {1, 16, 1, 520}),
              be.gpu->zeros(DType::BF16, {1, 16, 1, 520})};
  Tensor q520 = be.gpu->zeros(DType::BF16, {T, 1, 520}),
         o520 = be.gpu->alloc(DType::BF16, {T, 1, 520});
  EXPECT_THROW(be.gpu->attention(o520, q520, big, step, c.params), Error);  // head dim > 512
}

}  // namespace cuda_attention_test
}  // namespace tandem
