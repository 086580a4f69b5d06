#include "backend/cpu/cpu_host_memory.h"

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

void* map_huge_raw(size_t bytes) {
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
  return p;
}

void unmap_huge(void* p, size_t bytes) {
  munmap(p, round_up(std::max<size_t>(bytes, 1), kHugePage));
}

std::shared_ptr<void> map_huge(size_t bytes) {
  return std::shared_ptr<void>(map_huge_raw(bytes), [bytes](void* p) { unmap_huge(p, bytes); });
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

namespace {

void* new_buffer(size_t size) {
  if (size >= kHugePage) return map_huge_raw(size);
  void* p = std::aligned_alloc(64, size);  // size is a multiple of 64 (a class)
  if (!p) fail("out of host memory allocating {} bytes", size);
  return p;
}

void delete_buffer(void* p, size_t size) {
  if (size >= kHugePage)
    unmap_huge(p, size);
  else
    std::free(p);
}

}  // namespace

BufferCache::Shelves::~Shelves() {
  for (auto& [size, buffers] : free)
    for (void* p : buffers) delete_buffer(p, size);
}

BufferCache::BufferCache(size_t max_cached_bytes) : shelves_(std::make_shared<Shelves>()) {
  shelves_->max_cached = max_cached_bytes;
}

size_t BufferCache::size_class(size_t bytes) {
  // Eight classes per power of two: the top four bits of the size, rounded up.
  size_t top = size_t(1) << (63 - __builtin_clzll(std::max<size_t>(bytes, kMinBytes)));
  const size_t step = top / 8;
  return round_up(bytes, step);
}

std::shared_ptr<void> BufferCache::take(size_t bytes) {
  const size_t size = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(shelves_->mu);
    auto it = shelves_->free.find(size);
    if (it != shelves_->free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      shelves_->cached -= size;
    }
  }
  if (!p) p = new_buffer(size);
  std::weak_ptr<Shelves> home = shelves_;
  return std::shared_ptr<void>(p, [home, size](void* q) {
    if (auto shelves = home.lock()) {
      std::lock_guard<std::mutex> lock(shelves->mu);
      if (shelves->cached + size <= shelves->max_cached) {
        shelves->free[size].push_back(q);
        shelves->cached += size;
        return;
      }
    }
    delete_buffer(q, size);
  });
}

size_t BufferCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(shelves_->mu);
  return shelves_->cached;
}

}  // namespace tandem::cpu
