// Huge-page host memory (cpu_huge_pages.h): mappings are 2 MiB-aligned, zero-filled and
// writable; the arena packs allocations without overlap, keeps each chunk alive as long
// as any allocation in it, and gives oversized requests a mapping of their own; the CPU
// backend puts large uploads and large zeros there and their contents are what was asked.
// Whether the kernel really backs them with 2 MiB pages depends on the system (THP mode,
// free memory), so no test asserts it; bench/cpu_ops_bench reports what the stream gains.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_huge_pages.h"
#include "core/dtype.h"

namespace tandem {
namespace {

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

}  // namespace
}  // namespace tandem
