// Host memory of the CPU backend, for the two kinds of tensor a step touches most.
//
// Weights and the KV cache, read every step, live on 2 MiB pages: a decode step reads
// every weight once, front to back, and on 4 KiB pages that stream takes a TLB miss every
// 4 KiB and the hardware prefetchers stop at every page boundary. Transparent huge pages
// run in `madvise` mode on the machines measured, so only ranges that are 2 MiB-aligned
// and marked MADV_HUGEPAGE get them: an aligned allocation of its own per tensor would
// waste up to 2 MiB each, so weights are packed one after another into shared mappings
// (HugePageArena). Where the kernel gives no huge pages (THP off, or no 2 MiB page free)
// the memory is ordinary 4 KiB pages: slower, never wrong.
//
// Activations are allocated and freed by every op of every step, in the same sizes step
// after step. A fresh block of megabytes costs page faults and the kernel's zeroing each
// time (glibc maps and unmaps large blocks), so large ones are kept for reuse
// (BufferCache) instead.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tandem::cpu {

// An anonymous mapping of round_up(bytes, 2 MiB), 2 MiB-aligned and marked
// MADV_HUGEPAGE, zero-filled (by the kernel, as its pages are first touched). Fails
// (tandem::Error) when the system has no memory to map. unmap_huge takes the same bytes.
void* map_huge_raw(size_t bytes);
void unmap_huge(void* p, size_t bytes);

// map_huge_raw, unmapped when the last owner lets go.
std::shared_ptr<void> map_huge(size_t bytes);

// Packs allocations one after another (64-byte aligned) into huge-page mappings of
// kChunkBytes, or of their own size when larger. Each allocation shares ownership of its
// chunk, so a chunk is unmapped once the arena has moved past it and the last allocation
// in it is gone. Space inside a chunk is never reused: this is for tensors that live as
// long as the model (weights), not for per-step data.
class HugePageArena {
 public:
  static constexpr size_t kChunkBytes = size_t(32) << 20;

  // Zero-filled memory for `bytes` (> 0), kept alive by the returned pointer.
  std::shared_ptr<void> allocate(size_t bytes);

 private:
  std::mutex mu_;
  std::shared_ptr<void> chunk_;  // the chunk being filled
  size_t used_ = 0, size_ = 0;   // bytes of chunk_ handed out / mapped
};

// Buffers of at least kMinBytes, handed out with whatever their last user left in them and
// kept for reuse when their last owner lets go, up to max_cached_bytes in all (past that
// they are freed). Sizes are rounded up to one of eight classes per power of two, so a
// step whose sizes vary a little still reuses. Buffers of 2 MiB and more are huge-page
// mappings. Thread-safe; a buffer may outlive the cache (it is then freed, not kept).
class BufferCache {
 public:
  static constexpr size_t kMinBytes = size_t(64) << 10;

  explicit BufferCache(size_t max_cached_bytes);

  // A 64-byte aligned buffer of at least `bytes` (>= kMinBytes), contents unspecified.
  std::shared_ptr<void> take(size_t bytes);
  // Bytes kept for reuse now.
  size_t cached_bytes() const;

  // The size class `bytes` is rounded up to.
  static size_t size_class(size_t bytes);

 private:
  struct Shelves {
    ~Shelves();  // frees the buffers still on the shelves
    std::mutex mu;
    std::map<size_t, std::vector<void*>> free;  // by size class
    size_t cached = 0, max_cached = 0;
  };
  std::shared_ptr<Shelves> shelves_;  // shared with the buffers' deleters
};

}  // namespace tandem::cpu
