// Released window blocks read as the null block. Attention must never let the null
// block's contents into a result: with the null block poisoned with NaN, windowed
// attention through a table whose dead blocks were released equals, bit for bit, the
// same attention through the table before the release.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "engine/step_plan.h"
#include "kv/kv_block_manager.h"
#include "../kv/grow_tables.h"

namespace tandem {
namespace null_block_attention_test {

constexpr int kBlock = 4, kWindow = 6, kBlocks = 8, kHq = 2, kHkv = 1, kDh = 8;

Tensor device_i32(Backend& be, const std::vector<int32_t>& v, Shape shape) {
  Tensor host = Tensor::borrow(const_cast<int32_t*>(v.data()), DType::I32, shape);
  return be.upload(host, DType::I32);
}

// The plan's arrays on the backend, as the runner uploads a one-group plan.
StepTensors upload(Backend& be, const StepPlan& plan) {
  int64_t T = plan.num_tokens(), B = plan.num_rows();
  const KvGroupPlan& g = plan.groups.at(0);
  StepTensors s;
  s.tokens = device_i32(be, plan.tokens, {T});
  s.positions = device_i32(be, plan.positions, {T});
  s.seq_starts = device_i32(be, plan.seq_starts, {B + 1});
  s.context_lens = device_i32(be, plan.context_lens, {B});
  s.sample_index = device_i32(be, plan.sample_index, {int64_t(plan.sample_index.size())});
  s.groups = {{device_i32(be, g.slot_map, {T}), device_i32(be, g.block_table, {B, int64_t(g.max_blocks)}),
               g.max_blocks}};
  s.num_tokens = int(T);
  s.num_rows = int(B);
  s.block_size = kBlock;
  for (int32_t c : plan.context_lens) s.max_context_len = std::max(s.max_context_len, c);
  return s;
}

// Output of attention for one row computing [nc, nc + n) through `table`.
std::vector<float> attend(Backend& be, const PagedKv& cache, const Tensor& q,
                          const std::vector<int32_t>& tokens, int nc, int n,
                          const std::vector<int32_t>& table, int window) {
  BlockTables tables{table};
  PlanRow row{tokens, nc, n, tables, 1};
  StepTensors step = upload(be, build_step_plan(std::span<const PlanRow>(&row, 1), kBlock));
  Tensor out = be.zeros(DType::F32, {n, kHq, kDh});
  AttentionParams params;
  params.scale = 0.35f;
  params.window = window;
  be.attention(out, q, cache, step, params);
  Tensor host = be.to_host_f32(out);
  return std::vector<float>(host.ptr<float>(), host.ptr<float>() + host.numel());
}

TEST(NullBlockAttention, PoisonedNullBlockNeverReachesWindowedAttention) {
  auto be = make_cpu_backend();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  PagedKv cache;
  cache.k = be->zeros(DType::F32, {kBlocks, kBlock, kHkv, kDh});
  cache.v = be->zeros(DType::F32, {kBlocks, kBlock, kHkv, kDh});
  const int64_t per_block = kBlock * kHkv * kDh;
  for (int64_t i = 0; i < kBlocks * per_block; i++) {
    bool null_block = i < per_block;  // block 0
    cache.k.ptr<float>()[i] = null_block ? std::numeric_limits<float>::quiet_NaN() : normal(rng);
    cache.v.ptr<float>()[i] = null_block ? std::numeric_limits<float>::quiet_NaN() : normal(rng);
  }
  std::vector<KvLayerKind> layers{{kWindow}};
  // (num_computed, new tokens): chunks and single decode tokens, block-aligned or not.
  for (auto [nc, n] : std::vector<std::pair<int, int>>{{10, 4}, {13, 1}, {6, 3}, {21, 2}, {8, 1}}) {
    KvBlockManager kv(make_kv_groups(layers), std::vector<int>{kBlocks}, kBlock);
    BlockTables t;
    test::grow(kv, t, 0, nc);  // what earlier steps computed
    test::grow(kv, t, nc, nc + n);
    std::vector<int32_t> before = t[0];
    int released = kv.release_out_of_window(t, nc);
    std::vector<int32_t> tokens(size_t(nc + n), 1);
    std::vector<float> qv(size_t(n * kHq * kDh));
    for (float& x : qv) x = normal(rng);
    Tensor q = be->upload(Tensor::borrow(qv.data(), DType::F32, {n, kHq, kDh}), DType::F32);
    std::vector<float> ref = attend(*be, cache, q, tokens, nc, n, before, kWindow);
    std::vector<float> got = attend(*be, cache, q, tokens, nc, n, t[0], kWindow);
    for (float x : ref) ASSERT_TRUE(std::isfinite(x));
    EXPECT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)), 0)
        << "nc " << nc << " n " << n << " (" << released << " blocks released)";
    if (released > 0) {  // the poison is real: full attention through the table reads it
      std::vector<float> full = attend(*be, cache, q, tokens, nc, n, t[0], 0);
      EXPECT_TRUE(std::isnan(full[0])) << "nc " << nc;
    }
  }
}

}  // namespace null_block_attention_test
}  // namespace tandem
