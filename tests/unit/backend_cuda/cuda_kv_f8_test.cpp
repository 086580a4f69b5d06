// The f8_e4m3 KV cache on CUDA. The GPU stores e4m3 bytes and widens them back to bf16
// as it reads; the CPU reference is the f32 twin run on the same values rounded through
// e4m3 on the host (f32_to_f8e4m3), so these tests check the device's rounding (cache
// bytes equal the host's), every kernel's e4m3 read path (prefill, decode, its splits,
// graph-capacity bounds), and the fused qkv_to_cache write, not the quantization error
// itself.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "attention_cases.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_kv_f8_test {

using test::kBf16Tol;
using namespace test::attention;

std::vector<float> through_f8(std::vector<float> v) {
  for (float& x : v) x = f8e4m3_to_f32(f32_to_f8e4m3(x));
  return v;
}

// Random data scaled to the e4m3 range a real K/V spans (|x| up to ~8, where a step is
// 0.5), so rounding is exercised at many exponents.
AttnData f8_data(const AttnCase& c, const HostAttnStep& s, std::mt19937& rng) {
  AttnData d = random_data(c, s, rng);
  for (auto* v : {&d.k_cache, &d.v_cache, &d.k_new, &d.v_new})
    for (float& x : *v) x = bf16_to_f32(f32_to_bf16(x * 8.f));
  return d;
}

struct F8Result {
  std::vector<float> k, v, out;
};

// write_kv then attention with an e4m3 cache on the GPU.
F8Result run_f8(CudaBackend& gpu, const AttnCase& c, const HostAttnStep& s, const AttnData& d,
                const StepTensors& step) {
  const int64_t T = step.num_tokens, NB = s.num_blocks;
  const Shape shape{NB, c.block_size, c.Hkv, c.Dh};
  PagedKv cache{test::put_as(gpu, d.k_cache, shape, DType::F8E4M3),
                test::put_as(gpu, d.v_cache, shape, DType::F8E4M3)};
  gpu.write_kv(cache, test::put(gpu, d.k_new, {T, c.Hkv, c.Dh}),
               test::put(gpu, d.v_new, {T, c.Hkv, c.Dh}), step);
  Tensor out = test::poisoned(gpu, DType::BF16, {T, c.Hq, c.Dh});
  gpu.attention(out, test::put(gpu, d.q, {T, c.Hq, c.Dh}), cache, step, c.params);
  return {test::to_vec(gpu, cache.k), test::to_vec(gpu, cache.v), test::to_vec(gpu, out)};
}

// The CPU's f32 twin on the e4m3-rounded values: cache contents and output.
F8Result run_reference(Backend& cpu, const AttnCase& c, const HostAttnStep& s, const AttnData& d) {
  const StepTensors step = upload_step(cpu, s, c);
  const int64_t T = step.num_tokens, NB = s.num_blocks;
  const Shape shape{NB, c.block_size, c.Hkv, c.Dh};
  PagedKv cache{test::put(cpu, through_f8(d.k_cache), shape),
                test::put(cpu, through_f8(d.v_cache), shape)};
  cpu.write_kv(cache, test::put(cpu, through_f8(d.k_new), {T, c.Hkv, c.Dh}),
               test::put(cpu, through_f8(d.v_new), {T, c.Hkv, c.Dh}), step);
  Tensor out = cpu.alloc(DType::F32, {T, c.Hq, c.Dh});
  cpu.attention(out, test::put(cpu, d.q, {T, c.Hq, c.Dh}), cache, step, c.params);
  return {test::to_vec(cpu, cache.k), test::to_vec(cpu, cache.v), test::to_vec(cpu, out)};
}

void expect_match(const F8Result& gpu, const F8Result& ref) {
  EXPECT_EQ(gpu.k, ref.k) << "K cache bytes differ from the host's e4m3 rounding";
  EXPECT_EQ(gpu.v, ref.v) << "V cache bytes differ from the host's e4m3 rounding";
  EXPECT_LE(test::rel_err(gpu.out, ref.out), kBf16Tol) << "attention output";
}

TEST(CudaKvF8, WriteKvAndAttentionMatchTheCpuOnRoundedValues) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    for (const std::vector<AttnCase>* list : {&cases(), &decode_cases()}) {
      for (const AttnCase& c : *list) {
        if (c.Dh % 16 != 0) continue;  // an e4m3 cache needs whole 16-byte chunks per head
        SCOPED_TRACE(testing::Message() << c.name << ", " << test::seed_trace(seed));
        std::mt19937 rng(seed);
        const HostAttnStep s = make_host_step(c, rng);
        const AttnData d = f8_data(c, s, rng);
        const F8Result ref = run_reference(*be.cpu, c, s, d);
        expect_match(run_f8(*be.gpu, c, s, d, upload_step(*be.gpu, s, c)), ref);
        // A replayed graph's capacity: wider table, longer max context.
        expect_match(run_f8(*be.gpu, c, s, d, upload_step(*be.gpu, s, c, 37, 6000)), ref);
      }
    }
  }
}

// Device rounding of edge values: saturation, ties, subnormals, signed zero.
TEST(CudaKvF8, DeviceRoundingEqualsTheHostsOnEdgeValues) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::vector<float> v = {0.f,     -0.f,     1.f,      448.f,   449.f,    1e6f,     -1e6f,
                          1.0625f, 1.1875f,  0.00195f, 0.0029f, 0.015625f, -0.0078f, 240.f,
                          3.5f,    -17.3f,   0.3333f, 100.f,   -0.0004f, 464.f};
  v.resize(32, 2.5f);
  Tensor t = test::put_as(*be.gpu, v, {int64_t(v.size())}, DType::F8E4M3);
  EXPECT_EQ(test::to_vec(*be.gpu, t), through_f8(v));  // upload rounds on the host
  // Through write_kv, the device's rounding of bf16 inputs.
  const int T = 1;
  AttnCase c{"edge", 2, 2, 16, params(1.f), {{1, 1}}};
  std::mt19937 rng(1);
  const HostAttnStep s = make_host_step(c, rng);
  const StepTensors step = upload_step(*be.gpu, s, c);
  std::vector<float> kv(v.begin(), v.end());
  for (float& x : kv) x = bf16_to_f32(f32_to_bf16(x));
  PagedKv cache{be.gpu->zeros(DType::F8E4M3, {s.num_blocks, 16, 2, 16}),
                be.gpu->zeros(DType::F8E4M3, {s.num_blocks, 16, 2, 16})};
  be.gpu->write_kv(cache, test::put(*be.gpu, kv, {T, 2, 16}), test::put(*be.gpu, kv, {T, 2, 16}),
                   step);
  const std::vector<float> k = test::to_vec(*be.gpu, cache.k);
  const int64_t slot = s.h.slot_map[0];
  const std::vector<float> got(k.begin() + slot * 32, k.begin() + slot * 32 + 32);
  EXPECT_EQ(got, through_f8(kv));
}

// The fused qkv_to_cache kernel into an e4m3 cache stores exactly the e4m3 rounding of
// what it stores into a bf16 cache (q is unaffected).
TEST(CudaKvF8, QkvToCacheStoresTheRoundedBf16Values) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  CudaBackend& gpu = *be.gpu;
  const int Hq = 8, Hkv = 2, Dh = 128, T = 5;
  AttnCase c{"qkv", Hq, Hkv, Dh, params(1.f), {{40, 3}, {2, 2}}};
  std::mt19937 rng(3);
  const HostAttnStep s = make_host_step(c, rng);
  const StepTensors step = upload_step(gpu, s, c);
  std::vector<float> qkv = test::random_bf16(rng, size_t(T) * (Hq + 2 * Hkv) * Dh, -6.f, 6.f);
  std::vector<float> inv_freq(Dh / 2);
  for (int i = 0; i < Dh / 2; i++) inv_freq[size_t(i)] = std::pow(10000.f, -2.f * i / Dh);
  RopeSpec spec;
  spec.rotary_dim = Dh;
  spec.inv_freq = inv_freq;
  const Shape shape{s.num_blocks, 16, Hkv, Dh};
  auto run = [&](DType cache_dtype, std::vector<float>* q_out) {
    PagedKv cache{gpu.zeros(cache_dtype, shape), gpu.zeros(cache_dtype, shape)};
    Tensor q = gpu.alloc(DType::BF16, {T, Hq, Dh});
    gpu.qkv_to_cache(q, test::put(gpu, qkv, {T, (Hq + 2 * Hkv) * Dh}), cache, step, spec, {});
    *q_out = test::to_vec(gpu, q);
    return std::make_pair(test::to_vec(gpu, cache.k), test::to_vec(gpu, cache.v));
  };
  std::vector<float> q_bf16, q_f8;
  const auto [k_bf16, v_bf16] = run(DType::BF16, &q_bf16);
  const auto [k_f8, v_f8] = run(DType::F8E4M3, &q_f8);
  EXPECT_EQ(q_f8, q_bf16);
  EXPECT_EQ(k_f8, through_f8(k_bf16));
  EXPECT_EQ(v_f8, through_f8(v_bf16));
}

TEST(CudaKvF8, RejectsMixedOrMisalignedCaches) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  AttnCase c{"bad", 2, 2, 16, params(1.f), {{4, 1}}};
  std::mt19937 rng(5);
  const HostAttnStep s = make_host_step(c, rng);
  const StepTensors step = upload_step(*be.gpu, s, c);
  Tensor kv = test::put(*be.gpu, std::vector<float>(32, 1.f), {1, 2, 16});
  PagedKv mixed{be.gpu->zeros(DType::F8E4M3, {s.num_blocks, 16, 2, 16}),
                be.gpu->zeros(DType::BF16, {s.num_blocks, 16, 2, 16})};
  EXPECT_THROW(be.gpu->write_kv(mixed, kv, kv, step), Error);
  // Head dim 8: an e4m3 head is half a 16-byte chunk.
  PagedKv narrow{be.gpu->zeros(DType::F8E4M3, {s.num_blocks, 16, 4, 8}),
                 be.gpu->zeros(DType::F8E4M3, {s.num_blocks, 16, 4, 8})};
  Tensor kv8 = test::put(*be.gpu, std::vector<float>(32, 1.f), {1, 4, 8});
  EXPECT_THROW(be.gpu->write_kv(narrow, kv8, kv8, step), Error);
}

}  // namespace cuda_kv_f8_test
}  // namespace tandem
