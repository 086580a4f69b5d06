// Host memory on 2 MiB pages for what the CPU backend streams every step: the weights and
// the KV cache. A decode step reads every weight once, front to back; on 4 KiB pages that
// stream takes a TLB miss every 4 KiB and the hardware prefetchers stop at every page
// boundary. Transparent huge pages run in `madvise` mode on the machines measured, so
// only ranges that are 2 MiB-aligned and marked MADV_HUGEPAGE get them: an aligned
// allocation of its own per tensor would waste up to 2 MiB each, so weights are packed
// one after another into shared mappings instead (HugePageArena).
//
// Where the kernel gives no huge pages (THP off, or no 2 MiB page free) the memory is
// ordinary 4 KiB pages: slower, never wrong.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>

namespace tandem::cpu {

// One anonymous mapping of at least `bytes`, 2 MiB-aligned and marked MADV_HUGEPAGE,
// zero-filled (by the kernel, as its pages are first touched); unmapped when the last
// owner lets go. Fails (tandem::Error) when the system has no memory to map.
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

}  // namespace tandem::cpu
