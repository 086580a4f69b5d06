#include "backend/cpu/cpu_huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace tandem::cpu {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

std::shared_ptr<void> map_huge(size_t bytes) {
  const size_t size = round_up(std::max<size_t>(bytes, 1), kHugePage);
  // Over-map by one huge page, then unmap the unaligned head and the tail beyond it.
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED)
    fail("out of host memory mapping {} bytes: {}", size, std::strerror(errno));
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  if (const size_t tail = start + size + kHugePage - (aligned + size); tail > 0)
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // EINVAL where THP is compiled out or disabled: the mapping stays on 4 KiB pages.
  madvise(p, size, MADV_HUGEPAGE);
  return std::shared_ptr<void>(p, [size](void* q) { munmap(q, size); });
}

std::shared_ptr<void> HugePageArena::allocate(size_t bytes) {
  const size_t need = round_up(std::max<size_t>(bytes, 1), 64);
  std::lock_guard<std::mutex> lock(mu_);
  if (need > kChunkBytes) return map_huge(need);  // its own mapping; the chunk stays open
  if (!chunk_ || used_ + need > size_) {
    chunk_ = map_huge(kChunkBytes);
    used_ = 0;
    size_ = kChunkBytes;
  }
  void* p = static_cast<char*>(chunk_.get()) + used_;
  used_ += need;
  return std::shared_ptr<void>(chunk_, p);  // shares the chunk's ownership
}

}  // namespace tandem::cpu
