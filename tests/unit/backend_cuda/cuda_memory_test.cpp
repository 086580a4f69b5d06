// The CUDA backend's memory verbs (upload with dtype conversion, to_host_f32, zeros,
// write_i32, copy, split_columns) and its caching allocator (reuse, steady state, size
// classes). Expected values are the host conversions of core/dtype.h, computed here.
#include <gtest/gtest.h>

#include <numeric>

#include "backend/cuda/cuda_memory.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_memory_test {

using test::to_vec;

TEST(CudaMemory, UploadConvertsAndReadsBack) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::mt19937 rng(3);
  const auto v = test::random_vec(rng, 1001, -70.f, 70.f);
  Tensor host = test::host_f32(v, {7, 143});
  EXPECT_EQ(to_vec(gpu, gpu.upload(host, DType::F32)), v);
  std::vector<float> bf(v.size()), hf(v.size());
  for (size_t i = 0; i < v.size(); i++) {
    bf[i] = bf16_to_f32(f32_to_bf16(v[i]));
    hf[i] = f16_to_f32(f32_to_f16(v[i]));
  }
  Tensor b = gpu.upload(host, DType::BF16);
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(b.device, Device::CUDA);
  EXPECT_EQ(to_vec(gpu, b), bf);
  EXPECT_EQ(to_vec(gpu, gpu.upload(host, DType::F16)), hf);

  // bf16 and f16 host data: bf16 -> bf16 raw, f16 -> bf16 converted.
  Tensor host_bf = Tensor::empty_host(DType::BF16, {1001});
  convert_from_f32(v.data(), host_bf.data, DType::BF16, v.size());
  EXPECT_EQ(to_vec(gpu, gpu.upload(host_bf, DType::BF16)), bf);
  Tensor host_hf = Tensor::empty_host(DType::F16, {1001});
  convert_from_f32(v.data(), host_hf.data, DType::F16, v.size());
  std::vector<float> hf_bf(v.size());
  for (size_t i = 0; i < v.size(); i++) hf_bf[i] = bf16_to_f32(f32_to_bf16(hf[i]));
  EXPECT_EQ(to_vec(gpu, gpu.upload(host_hf, DType::BF16)), hf_bf);

  std::vector<int32_t> ids(77);
  std::iota(ids.begin(), ids.end(), -30);
  const auto back = to_vec(gpu, test::put_i32(gpu, ids, {77}));
  for (size_t i = 0; i < ids.size(); i++) EXPECT_EQ(back[i], float(ids[i]));

  EXPECT_THROW(gpu.upload(host, DType::I32), Error);
  EXPECT_THROW(gpu.upload(test::host_i32(ids, {77}), DType::BF16), Error);
}

// Larger than one staging slot (4 MiB): the write is split and reassembled in order.
TEST(CudaMemory, LargeUploadCrossesStagingSlots) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  std::vector<float> v(size_t(3) << 20);
  for (size_t i = 0; i < v.size(); i++) v[i] = float(i % 100003) - 5.f;
  EXPECT_EQ(to_vec(gpu, gpu.upload(test::host_f32(v, {int64_t(v.size())}), DType::F32)), v);
}

TEST(CudaMemory, ZerosWriteCopyAndEmptyTensors) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  // A block that held NaNs comes back from zeros() cleared.
  void* reused = test::poisoned(gpu, DType::BF16, {3, 5}).data;
  Tensor z = gpu.zeros(DType::BF16, {3, 5});
  EXPECT_EQ(z.data, reused);
  EXPECT_EQ(to_vec(gpu, z), std::vector<float>(15, 0.f));

  Tensor ids = test::poisoned(gpu, DType::I32, {10});
  const std::vector<int32_t> src = {4, -1, 7, 2000000000};
  gpu.write_i32(ids, src.data(), 4);
  const auto got = to_vec(gpu, ids);
  for (size_t i = 0; i < 4; i++) EXPECT_EQ(got[i], float(src[i]));
  EXPECT_EQ(got[4], float(std::numeric_limits<int32_t>::min()));  // untouched
  EXPECT_THROW(gpu.write_i32(ids, src.data(), 11), Error);

  std::mt19937 rng(5);
  const auto v = test::random_bf16(rng, 24);
  Tensor a = test::put(gpu, v, {4, 6});
  Tensor b = test::poisoned(gpu, DType::BF16, {24});
  gpu.copy(b, a);
  EXPECT_EQ(to_vec(gpu, b), v);
  Tensor wrong = gpu.alloc(DType::BF16, {23});
  EXPECT_THROW(gpu.copy(wrong, a), Error);

  Tensor empty = gpu.alloc(DType::BF16, {0, 8});
  EXPECT_TRUE(empty.defined());
  EXPECT_TRUE(to_vec(gpu, empty).empty());
  EXPECT_TRUE(to_vec(gpu, gpu.zeros(DType::F32, {0})).empty());
}

TEST(CudaMemory, SplitColumnsCutsEveryRow) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  for (DType dt : {DType::BF16, DType::F32}) {
    const int64_t R = 7, C = 9;
    std::vector<float> v(size_t(R * C));
    std::iota(v.begin(), v.end(), 1.f);
    Tensor x = test::put_as(gpu, v, {R, C}, dt);
    Tensor p0 = test::poisoned(gpu, dt, {R, 3}), p1 = test::poisoned(gpu, dt, {R, 5});
    Tensor p2 = test::poisoned(gpu, dt, {R, 1});
    gpu.split_columns(x, {&p0, &p1, &p2});
    const auto a = to_vec(gpu, p0), b = to_vec(gpu, p1), c = to_vec(gpu, p2);
    for (int64_t r = 0; r < R; r++) {
      for (int64_t j = 0; j < 3; j++) EXPECT_EQ(a[size_t(r * 3 + j)], v[size_t(r * C + j)]);
      for (int64_t j = 0; j < 5; j++) EXPECT_EQ(b[size_t(r * 5 + j)], v[size_t(r * C + 3 + j)]);
      EXPECT_EQ(c[size_t(r)], v[size_t(r * C + 8)]);
    }
    Tensor bad = gpu.alloc(dt, {R, 4});
    EXPECT_THROW(gpu.split_columns(x, {&p0, &bad}), Error);
  }
}

TEST(CudaMemory, WriteI32RowsFillsTheFirstColumnsOfEachRowLikeTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  auto cpu = make_cpu_backend();
  std::vector<int32_t> src(3 * 4);
  std::iota(src.begin(), src.end(), 100);
  std::vector<float> results[2];
  int i = 0;
  for (Backend* be : {static_cast<Backend*>(&gpu), cpu.get()}) {
    std::vector<int32_t> init(5 * 10, -1);
    Tensor t = be->upload(Tensor::borrow(init.data(), DType::I32, {5, 10}), DType::I32);
    be->write_i32_rows(t, src.data(), 3, 4);
    EXPECT_THROW(be->write_i32_rows(t, src.data(), 6, 4), std::exception);
    EXPECT_THROW(be->write_i32_rows(t, src.data(), 1, 11), std::exception);
    results[i++] = to_vec(*be, t);
  }
  EXPECT_EQ(results[0], results[1]);
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 10; c++)
      EXPECT_EQ(results[0][size_t(r * 10 + c)], r < 3 && c < 4 ? float(100 + r * 4 + c) : -1.f);
  // Rows wider than the staging ring's slots still arrive, row by row.
  const int64_t wide = (int64_t(4) << 20) / 4 + 3;
  std::vector<int32_t> big(size_t(2 * wide));
  std::iota(big.begin(), big.end(), 0);
  Tensor t = gpu.zeros(DType::I32, {2, wide + 1});
  gpu.write_i32_rows(t, big.data(), 2, wide);
  auto back = to_vec(gpu, t);
  EXPECT_EQ(back[size_t(wide + 1 + 5)], float(wide + 5));
  EXPECT_EQ(back[size_t(wide)], 0.f);
}

TEST(CudaAllocator, SizeClasses) {
  EXPECT_EQ(CudaAllocator::block_size_for(0), 512u);
  EXPECT_EQ(CudaAllocator::block_size_for(512), 512u);
  EXPECT_EQ(CudaAllocator::block_size_for(513), 640u);  // four classes per octave
  EXPECT_EQ(CudaAllocator::block_size_for(1000), 1024u);
  EXPECT_EQ(CudaAllocator::block_size_for(1025), 1280u);
  EXPECT_EQ(CudaAllocator::block_size_for(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(CudaAllocator::block_size_for((size_t(1) << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(CudaAllocator::block_size_for((size_t(5) << 20) + 7), size_t(6) << 20);
  for (size_t n : {1u, 100u, 777u, 4097u, 100000u, 3000000u})
    EXPECT_GE(CudaAllocator::block_size_for(n), n);
}

TEST(CudaAllocator, FreedBlocksAreReusedWithoutNewDriverMemory) {
  TANDEM_SKIP_WITHOUT_CUDA();
  CudaBackend gpu(0);
  const std::vector<Shape> shapes = {{3, 100}, {1}, {0}, {17, 4096}, {300, 2048}, {3, 100}};
  auto run = [&] {
    std::vector<Tensor> live;
    for (const Shape& s : shapes) live.push_back(gpu.alloc(DType::BF16, s));
    live.erase(live.begin() + 1);  // free one in the middle, then allocate again
    live.push_back(gpu.alloc(DType::F32, {1}));
  };
  run();
  const int64_t reserved = gpu.reserved_bytes();
  EXPECT_GT(reserved, 0);
  for (int i = 0; i < 3; i++) run();
  EXPECT_EQ(gpu.reserved_bytes(), reserved);

  // A freed block comes back for the same size: same address.
  void* first = gpu.alloc(DType::BF16, {1000, 64}).data;
  EXPECT_EQ(gpu.alloc(DType::BF16, {1000, 64}).data, first);
}

// A device "full" of cached blocks of other sizes: the allocator gives them back to the
// driver and retries, but never a block handed out while a graph was being captured.
TEST(CudaAllocator, WhenTheDeviceIsFullCachedBlocksGoBackExceptTheGraphs) {
  TANDEM_SKIP_WITHOUT_CUDA();
  constexpr size_t MiB = size_t(1) << 20;
  auto alloc = std::make_shared<CudaAllocator>(0, cudaStream_t{});
  const int64_t base = alloc->reserved_bytes();  // the cuBLAS workspace
  alloc->set_reserve_limit_for_tests(base + int64_t(64 * MiB));
  alloc->allocate(40 * MiB);  // freed at once: cached
  EXPECT_EQ(alloc->reserved_bytes(), base + int64_t(40 * MiB));
  {
    // 50 MiB is too large for the cached 40 MiB block, and both do not fit: the cached
    // one goes back to the driver.
    std::shared_ptr<void> b = alloc->allocate(50 * MiB);
    EXPECT_NE(b, nullptr);
    EXPECT_EQ(alloc->reserved_bytes(), base + int64_t(50 * MiB));
    // A live block is never given back: no room for another 40 MiB.
    EXPECT_THROW(alloc->allocate(40 * MiB), Error);
  }
  // The cached 50 MiB block, handed out again during a capture, is the graph's for good.
  alloc->set_capturing(true);
  alloc->allocate(50 * MiB);
  alloc->set_capturing(false);
  alloc->allocate(10 * MiB);  // a new block beside it (50 MiB is too large to serve 10)
  EXPECT_EQ(alloc->reserved_bytes(), base + int64_t(60 * MiB));
  // 12 MiB does not fit beside both: only the 10 MiB block goes back.
  alloc->allocate(12 * MiB);
  EXPECT_EQ(alloc->reserved_bytes(), base + int64_t(62 * MiB));
  // 20 MiB fits only if the graph's block went too: it does not.
  EXPECT_THROW(alloc->allocate(20 * MiB), Error);
  EXPECT_EQ(alloc->reserved_bytes(), base + int64_t(50 * MiB));
  EXPECT_NE(alloc->allocate(50 * MiB), nullptr);  // the graph's block serves its size
}

TEST(CudaAllocator, TensorsMayOutliveTheBackend) {
  TANDEM_SKIP_WITHOUT_CUDA();
  Tensor survivor;
  {
    CudaBackend gpu(0);
    survivor = gpu.zeros(DType::BF16, {4, 4});
  }
  EXPECT_TRUE(survivor.defined());
  survivor = Tensor{};  // returns the block to an allocator the backend no longer owns
}

}  // namespace cuda_memory_test
}  // namespace tandem
