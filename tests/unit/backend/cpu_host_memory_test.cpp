// Huge-page host memory (cpu_host_memory.h): mappings are 2 MiB-aligned, zero-filled and
// writable; the arena packs allocations without overlap, keeps each chunk alive as long
// as any allocation in it, and gives oversized requests a mapping of their own; the CPU
// backend puts large uploads and large zeros there and their contents are what was asked.
// The buffer cache rounds sizes up to classes, hands a released buffer to the next taker
// of its class, keeps no more than its cap and frees buffers that outlive it.
// Whether the kernel really backs them with 2 MiB pages depends on the system (THP mode,
// free memory), so no test asserts it; bench/cpu_ops_bench reports what the stream gains.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_host_memory.h"
#include "core/dtype.h"

namespace tandem {
namespace cpu_host_memory_test {

constexpr uintptr_t kHuge = uintptr_t(2) << 20;

uintptr_t address(const std::shared_ptr<void>& p) {
  return reinterpret_cast<uintptr_t>(p.get());
}

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return std::all_of(b, b + n, [](unsigned char c) { return c == 0; });
}

TEST(CpuHugePages, MappingsAreAlignedZeroedAndWritable) {
  for (size_t bytes : {size_t(1), size_t(3) << 20, (size_t(4) << 20) + 5}) {
    auto p = cpu::map_huge(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(address(p) % kHuge, 0u) << bytes;
    EXPECT_TRUE(all_zero(p.get(), bytes)) << bytes;
    std::memset(p.get(), 0xab, bytes);  // every byte asked for is writable
    EXPECT_EQ(static_cast<unsigned char*>(p.get())[bytes - 1], 0xab);
  }
}

TEST(CpuHugePages, ArenaPacksAllocationsWithoutOverlap) {
  cpu::HugePageArena arena;
  std::vector<std::pair<std::shared_ptr<void>, size_t>> got;
  // Enough to fill more than one chunk, in sizes that are not multiples of 64.
  for (size_t i = 0; i < 40; i++) {
    const size_t bytes = (size_t(1) << 20) + 77 * i + 1;
    auto p = arena.allocate(bytes);
    EXPECT_EQ(address(p) % 64, 0u);
    EXPECT_TRUE(all_zero(p.get(), bytes));
    std::memset(p.get(), int(i + 1), bytes);
    got.emplace_back(std::move(p), bytes);
  }
  for (size_t i = 0; i < got.size(); i++) {
    const auto* b = static_cast<const unsigned char*>(got[i].first.get());
    EXPECT_EQ(b[0], i + 1);  // no later allocation wrote over this one
    EXPECT_EQ(b[got[i].second - 1], i + 1);
    for (size_t j = i + 1; j < got.size(); j++) {
      const uintptr_t a0 = address(got[i].first), a1 = a0 + got[i].second;
      const uintptr_t b0 = address(got[j].first), b1 = b0 + got[j].second;
      EXPECT_TRUE(a1 <= b0 || b1 <= a0) << i << " overlaps " << j;
    }
  }
  // Consecutive allocations share a chunk: the first two are 1 MiB + 64 apart or so.
  EXPECT_EQ(address(got[1].first) - address(got[0].first), ((size_t(1) << 20) + 1 + 63) / 64 * 64);
}

TEST(CpuHugePages, AllocationsOutliveTheArenaAndOversizedOnesMapAlone) {
  std::shared_ptr<void> small, big;
  {
    cpu::HugePageArena arena;
    small = arena.allocate(100);
    big = arena.allocate(cpu::HugePageArena::kChunkBytes + 1);
    EXPECT_EQ(address(big) % kHuge, 0u);
    // The open chunk is still filled after an oversized request.
    auto next = arena.allocate(100);
    EXPECT_EQ(address(next), address(small) + 128);
  }
  std::memset(small.get(), 1, 100);  // the chunk lives on through `small`
  std::memset(big.get(), 2, cpu::HugePageArena::kChunkBytes + 1);
  EXPECT_EQ(static_cast<unsigned char*>(big.get())[cpu::HugePageArena::kChunkBytes], 2);
}

TEST(CpuHugePages, LargeUploadsAndZerosKeepTheirContents) {
  auto be = make_cpu_backend();
  const int64_t n = int64_t(1) << 20;  // 2 MiB of bf16, 4 MiB of f32
  Tensor host = Tensor::empty_host(DType::BF16, {n});
  for (int64_t i = 0; i < n; i++) host.ptr<uint16_t>()[i] = uint16_t(i * 2654435761u >> 16);
  Tensor w = be->upload(host, DType::BF16);
  ASSERT_EQ(w.dtype, DType::BF16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data) % 64, 0u);
  EXPECT_EQ(std::memcmp(w.data, host.data, host.nbytes()), 0);
  Tensor wide = be->upload(host, DType::F32);
  for (int64_t i : {int64_t(0), n / 3, n - 1})
    EXPECT_EQ(wide.ptr<float>()[i], bf16_to_f32(host.ptr<uint16_t>()[i]));
  Tensor z = be->zeros(DType::F32, {n});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(z.data) % kHuge, 0u);
  EXPECT_TRUE(all_zero(z.data, z.nbytes()));
}

TEST(CpuBufferCache, SizeClassesRoundUpByAtMostAnEighth) {
  using cpu::BufferCache;
  for (size_t bytes = BufferCache::kMinBytes; bytes < (size_t(64) << 20); bytes = bytes * 9 / 7 + 3) {
    const size_t c = BufferCache::size_class(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_LE(c, bytes + bytes / 8) << bytes;
    EXPECT_EQ(c % 64, 0u) << bytes;
    EXPECT_EQ(BufferCache::size_class(c), c) << bytes;  // a class is its own class
  }
  EXPECT_EQ(BufferCache::size_class(BufferCache::kMinBytes), BufferCache::kMinBytes);
}

TEST(CpuBufferCache, ReleasedBuffersAreReusedWithinTheirClass) {
  cpu::BufferCache cache(size_t(64) << 20);
  for (size_t bytes : {size_t(100) << 10, size_t(3) << 20}) {
    const size_t before = cache.cached_bytes();  // the last round's buffers, of another class
    auto a = cache.take(bytes);
    EXPECT_EQ(address(a) % 64, 0u);
    if (bytes >= kHuge) {
      EXPECT_EQ(address(a) % kHuge, 0u);
    }
    std::memset(a.get(), 0x5a, bytes);
    const uintptr_t first = address(a);
    auto b = cache.take(bytes);  // `a` is still held: a buffer of its own
    EXPECT_NE(address(b), first);
    a.reset();
    EXPECT_EQ(cache.cached_bytes(), before + cpu::BufferCache::size_class(bytes));
    auto c = cache.take(bytes - 64);  // same class: the same buffer, contents as left
    EXPECT_EQ(address(c), first);
    EXPECT_EQ(static_cast<unsigned char*>(c.get())[bytes - 65], 0x5a);
    EXPECT_EQ(cache.cached_bytes(), before);
  }
}

TEST(CpuBufferCache, KeepsNoMoreThanItsCapAndBuffersOutliveIt) {
  const size_t bytes = size_t(1) << 20;
  std::shared_ptr<void> survivor;
  {
    cpu::BufferCache cache(2 * bytes);
    std::vector<std::shared_ptr<void>> held;
    for (int i = 0; i < 5; i++) held.push_back(cache.take(bytes));
    held.clear();  // five released, two kept
    EXPECT_EQ(cache.cached_bytes(), 2 * bytes);
    survivor = cache.take(bytes);
    EXPECT_EQ(cache.cached_bytes(), bytes);
  }
  std::memset(survivor.get(), 1, bytes);  // still valid; freed (not shelved) on release
  survivor.reset();
}

TEST(CpuBufferCache, BackendAllocReusesLargeActivations) {
  auto be = make_cpu_backend();
  const int64_t n = int64_t(1) << 18;  // 1 MiB of f32
  Tensor a = be->alloc(DType::F32, {n});
  Tensor b = be->alloc(DType::F32, {n});
  EXPECT_NE(a.data, b.data);
  std::fill(a.ptr<float>(), a.ptr<float>() + n, 1.f);  // all of it is writable
  void* first = a.data;
  a = Tensor();
  Tensor c = be->alloc(DType::F32, {4, n / 4});
  EXPECT_EQ(c.data, first);
  EXPECT_EQ(c.numel(), n);
}

}  // namespace cpu_host_memory_test
}  // namespace tandem
