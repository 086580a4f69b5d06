// The NCCL communicator (backend/cuda/nccl_communicator.h), where the build found NCCL: at
// one rank every collective is the identity (the path the one-GPU machine runs), tandem
// turns NVLink multicast off itself, the sampled ids travel device to device into the next
// step's tokens, and with two GPUs or more the ranks' sums, gathered columns and broadcast
// ids (host and device) are every rank's. Skips without a GPU (or without NCCL:
// nccl_available(), so this file compiles the same in both builds).
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "backend/cuda/nccl_communicator.h"
#include "backend/tp_ops.h"
#include "cuda_test_util.h"

#define TANDEM_SKIP_WITHOUT_NCCL() \
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL (TANDEM_NCCL, NCCL_ROOT)"

namespace tandem::test {
namespace nccl_communicator_test {

std::vector<float> host_of(Backend& be, const Tensor& t) {
  Tensor h = be.to_host_f32(t);
  return std::vector<float>(h.ptr<float>(), h.ptr<float>() + h.numel());
}

TEST(NcclCommunicator, OneRankIsTheIdentityAndNvlsIsOff) {
  TANDEM_SKIP_WITHOUT_CUDA();
  TANDEM_SKIP_WITHOUT_NCCL();
  CudaBackend gpu(0);
  Backend* rank0 = &gpu;
  auto comms = make_nccl_communicators(std::span<Backend* const>(&rank0, 1));
  ASSERT_EQ(comms.size(), 1u);
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  const std::vector<float> v = {1.f, -2.f, 3.5f, 0.25f, 8.f, -1.f};
  Tensor x = put_as(gpu, v, {2, 3}, DType::F32);
  comms[0]->all_reduce_sum(x);
  EXPECT_EQ(host_of(gpu, x), v);
  Tensor out = gpu.alloc(DType::F32, {2, 3});
  comms[0]->all_gather_columns(out, x);
  EXPECT_EQ(host_of(gpu, out), v);
  std::vector<int32_t> ids = {5, 6, 7};
  comms[0]->broadcast(ids, 0);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 6, 7}));
  comms[0]->barrier();
}

// The sampled ids' device path at one rank: the picks' column (sampled_ids), broadcast in
// place on the stream (broadcast_ids), the received copy (picked_ids) feeding the next
// step's tokens (feed_tokens) — the tokens are the picks with no host round trip; the host
// still gets them from the sampling op, and the received copy is no op to wait for.
TEST(NcclCommunicator, BroadcastIdsFeedTheNextStepOnTheDevice) {
  TANDEM_SKIP_WITHOUT_CUDA();
  TANDEM_SKIP_WITHOUT_NCCL();
  CudaBackend gpu(0);
  Backend* rank0 = &gpu;
  auto comms = make_nccl_communicators(std::span<Backend* const>(&rank0, 1));
  std::vector<float> v(16, 0.f);
  v[5] = 4.f;      // row 0 picks 5
  v[8 + 2] = 4.f;  // row 1 picks 2
  Tensor logits = put_as(gpu, v, {2, 8}, DType::F32);
  const SampleRow rows[2] = {};
  PendingSample pending = gpu.sample_async(logits, rows);
  Tensor ids = gpu.sampled_ids(pending);
  comms[0]->broadcast_ids(ids, 0);
  PendingSample received = gpu.picked_ids(ids);
  Tensor tokens = gpu.alloc(DType::I32, {3});
  const int32_t start[3] = {9, -1, -1}, dst[2] = {2, 1}, src[2] = {0, 1};
  gpu.write_i32(tokens, start, 3);
  gpu.feed_tokens(tokens, dst, src, received);
  EXPECT_EQ(host_of(gpu, tokens), (std::vector<float>{9.f, 2.f, 5.f}));
  std::vector<SampledToken> out(2);
  gpu.sample_wait(pending, out);
  EXPECT_EQ(out[0].token, 5);
  EXPECT_EQ(out[1].token, 2);
  EXPECT_ANY_THROW(gpu.sample_wait(received, out));
}

TEST(NcclCommunicator, RanksOnSeveralGpusMeet) {
  TANDEM_SKIP_WITHOUT_CUDA();
  TANDEM_SKIP_WITHOUT_NCCL();
  const int n = cuda_device_count();
  if (n < 2) GTEST_SKIP() << "one GPU: the several-rank collectives need two";
  std::vector<std::unique_ptr<CudaBackend>> gpus;
  std::vector<Backend*> ranks;
  for (int d = 0; d < n; d++) {
    gpus.push_back(std::make_unique<CudaBackend>(d));
    ranks.push_back(gpus.back().get());
  }
  auto comms = make_nccl_communicators(ranks);
  std::vector<std::vector<float>> sums(static_cast<size_t>(n)), gathered(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(n), std::vector<int32_t>(2, -1));
  std::vector<std::vector<float>> device_ids(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      bind_thread(*gpus[size_t(r)]);  // this thread drives GPU r
      Tensor x = put_as(*gpus[size_t(r)], {float(r), float(10 * r)}, {1, 2}, DType::F32);
      Tensor all = gpus[size_t(r)]->alloc(DType::F32, {1, 2 * int64_t(n)});
      comms[size_t(r)]->all_gather_columns(all, x);
      comms[size_t(r)]->all_reduce_sum(x);
      sums[size_t(r)] = host_of(*gpus[size_t(r)], x);
      gathered[size_t(r)] = host_of(*gpus[size_t(r)], all);
      if (r == 0) ids[0] = {41, 42};
      comms[size_t(r)]->broadcast(ids[size_t(r)], 0);
      Tensor on_device = gpus[size_t(r)]->alloc(DType::I32, {2});
      const int32_t mine[2] = {100 + r, 200 + r};  // root 0's {100, 200} reach every rank
      gpus[size_t(r)]->write_i32(on_device, mine, 2);
      comms[size_t(r)]->broadcast_ids(on_device, 0);
      device_ids[size_t(r)] = host_of(*gpus[size_t(r)], on_device);
    });
  for (auto& t : threads) t.join();
  const float total = float(n * (n - 1) / 2);
  std::vector<float> columns;
  for (int r = 0; r < n; r++) columns.insert(columns.end(), {float(r), float(10 * r)});
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(sums[size_t(r)], (std::vector<float>{total, 10 * total})) << "rank " << r;
    EXPECT_EQ(gathered[size_t(r)], columns) << "rank " << r;
    EXPECT_EQ(ids[size_t(r)], (std::vector<int32_t>{41, 42})) << "rank " << r;
    EXPECT_EQ(device_ids[size_t(r)], (std::vector<float>{100.f, 200.f})) << "rank " << r;
  }
}

}  // namespace nccl_communicator_test
}  // namespace tandem::test
