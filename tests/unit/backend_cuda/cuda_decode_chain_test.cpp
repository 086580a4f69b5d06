// The few-token decode step's kernels chained with programmatic dependent launch
// (cuda_pdl.cuh), against the CPU: a kernel that starts loading before it waits on the
// kernel before must never read what that kernel writes. Here decode attention loads the
// keys of earlier steps early, while qkv_to_cache is still writing the step's own key
// into a slot that held something else; run eagerly and replayed from a graph.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../backend/step_builder.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_decode_chain_test {

using test::kBf16Tol;
using test::put;
using test::rel_err_between;

TEST(CudaDecodeChain, AttentionRightAfterQkvToCacheSeesTheStepsOwnKey) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(53);
  const int64_t Hq = 32, Hkv = 8, Dh = 128, NB = 40, BS = 16;
  const std::vector<int32_t> ids = test::shuffled_ids(rng, int(NB));
  auto blocks = [&](int from, int n) {
    return std::vector<int32_t>(ids.begin() + from, ids.begin() + from + n);
  };
  // One and two decoding rows: the steps the few-token attention kernel takes.
  const std::vector<std::vector<test::RowSpec>> steps = {
      {test::row_range(150, 1, blocks(0, 10))},
      {test::row_range(300, 1, blocks(0, 19)), test::row_range(63, 1, blocks(19, 4))}};
  const Shape cache_shape{NB, BS, Hkv, Dh};
  // Every slot holds a key and value of an earlier step; the slots this step writes start
  // out far larger than anything qkv_to_cache writes, so reading one early shows.
  std::vector<float> k_old = test::random_bf16(rng, size_t(NB * BS * Hkv * Dh));
  std::vector<float> v_old = test::random_bf16(rng, k_old.size());
  for (const auto& rows : steps) {
    SCOPED_TRACE(testing::Message() << rows.size() << " rows");
    std::vector<float> k_stale = k_old, v_stale = v_old;
    for (const auto& r : rows) {
      const int64_t p = r.positions[0], slot = r.blocks[size_t(p / BS)] * BS + p % BS;
      for (int64_t i = 0; i < Hkv * Dh; i++) {
        k_stale[size_t(slot * Hkv * Dh + i)] = 64.f;
        v_stale[size_t(slot * Hkv * Dh + i)] = -64.f;
      }
    }
    const StepTensors step_c = test::build_step(*be.cpu, rows, int(BS));
    const StepTensors step_g = test::build_step(*be.gpu, rows, int(BS));
    const int64_t T = step_c.num_tokens;
    const auto qkv = test::random_bf16(rng, size_t(T * (Hq + 2 * Hkv) * Dh), -2.f, 2.f);
    const RopeSpec rope = test::rope_spec(int(Dh));
    const AttentionParams params{float(1.0 / std::sqrt(double(Dh))), 0.f, 0};
    struct Chain {
      PagedKv kv;
      Tensor qkv, q, out;
    };
    auto make = [&](Backend& b) {
      Chain c{{put(b, k_stale, cache_shape), put(b, v_stale, cache_shape)},
              put(b, qkv, {T, (Hq + 2 * Hkv) * Dh}),
              b.alloc(b.act_dtype(), {T, Hq, Dh}),
              b.alloc(b.act_dtype(), {T, Hq, Dh})};
      return c;
    };
    auto run = [&](Backend& b, Chain& c, const StepTensors& step) {
      b.qkv_to_cache(c.q, c.qkv, c.kv, step, rope, {});
      b.attention(c.out, c.q, c.kv, step, params);
    };
    Chain cpu = make(*be.cpu);
    run(*be.cpu, cpu, step_c);

    Chain gpu = make(*be.gpu);
    run(*be.gpu, gpu, step_g);
    EXPECT_LE(rel_err_between(*be.gpu, gpu.out, *be.cpu, cpu.out), kBf16Tol) << "eager";

    const Tensor k0 = put(*be.gpu, k_stale, cache_shape), v0 = put(*be.gpu, v_stale, cache_shape);
    be.gpu->synchronize();
    be.gpu->capture_begin();
    run(*be.gpu, gpu, step_g);
    const std::shared_ptr<void> graph = be.gpu->capture_end();
    for (int replay = 0; replay < 3; replay++) {
      SCOPED_TRACE(testing::Message() << "graph replay " << replay);
      be.gpu->copy(gpu.kv.k, k0);  // the stale slots again
      be.gpu->copy(gpu.kv.v, v0);
      be.gpu->copy(gpu.out, test::poisoned(*be.gpu, DType::BF16, {T, Hq, Dh}));
      be.gpu->replay(graph);
      EXPECT_LE(rel_err_between(*be.gpu, gpu.out, *be.cpu, cpu.out), kBf16Tol);
    }
  }
}

}  // namespace cuda_decode_chain_test
}  // namespace tandem
