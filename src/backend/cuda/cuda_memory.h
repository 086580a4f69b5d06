// CudaAllocator: the CUDA backend's memory. Three things live here because they share one
// lifetime (the backend's, or longer while tensors survive it) and one stream:
//   - a caching allocator of device blocks: a freed block goes back to a free list and is
//     handed out again, so a steady state (the same sequence of sizes each step) never
//     calls cudaMalloc. Cached blocks go back to the driver only when cudaMalloc fails:
//     after the stream drains, every free block that no CUDA graph may use is freed and
//     the call is retried once (steps whose sizes keep changing, like eager steps of
//     hundreds of rows beside prefill chunks of every length, would otherwise cache a
//     block per size until the device is full). Blocks handed out while a graph is being
//     captured are the graph's (its addresses stay valid memory) and are never freed;
//   - a ring of pinned host buffers through which host -> device writes travel, so a write
//     returns without waiting for the GPU and the caller's buffer is free at once (small
//     writes, like a step's index arrays, share a buffer);
//   - the cuBLAS / cuBLASLt workspace.
// Ordering: every block is used on the backend's single stream, so a block freed by the
// host while kernels still read it is only reused by work queued after those kernels.
// Thread safety: a mutex guards the free lists (tensors may die on any thread); writes
// are meant for the one thread that drives the backend.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace tandem {

class CudaAllocator : public std::enable_shared_from_this<CudaAllocator> {
 public:
  // Bytes of the cuBLAS / cuBLASLt workspace.
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  // Allocates the staging ring and the workspace on `device`; writes are queued on `stream`.
  // Create it with std::make_shared (block deleters keep it alive).
  CudaAllocator(int device, cudaStream_t stream);
  ~CudaAllocator();
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  // A device block of at least `bytes` (0 gets the smallest block, never a null pointer),
  // owned by the returned pointer: its deleter hands the block back to the free lists.
  std::shared_ptr<void> allocate(size_t bytes);

  // Queues a copy of `bytes` host bytes to device memory `dst` on the stream. `src` is
  // copied into pinned memory before returning, so the caller may reuse it at once.
  // Not for use during CUDA graph capture (it waits on events of earlier writes).
  void write_async(void* dst, const void* src, size_t bytes);
  // The same for `rows` rows of `row_bytes` each, packed in `src`, to rows `dst_pitch`
  // bytes apart on the device (the first columns of a wider device table).
  void write_rows_async(void* dst, size_t dst_pitch, const void* src, size_t row_bytes,
                        size_t rows);

  void* workspace() const { return workspace_; }

  // Bytes held from the driver (blocks in use and cached), and how many blocks that is.
  int64_t reserved_bytes() const;
  int64_t num_driver_allocations() const;

  // Between capture_begin and capture_end (CudaBackend): blocks handed out meanwhile
  // belong to the graph and stay with the allocator for good.
  void set_capturing(bool capturing);
  // For tests: a cudaMalloc that would take reserved_bytes() past `bytes` fails as if the
  // device were full (0: no limit).
  void set_reserve_limit_for_tests(int64_t bytes);

  // The size a request of `bytes` is served with: small requests round up to one of four
  // classes per power of two (at least 512 B), large ones to a multiple of 2 MiB so that
  // weights and the KV cache waste little.
  static size_t block_size_for(size_t bytes);

 private:
  // One pinned host buffer of the ring. Writes fill it front to back; `copied` is recorded
  // after each of its copies, so once it has fired the whole buffer is free again.
  struct StagingSlot {
    char* host = nullptr;
    size_t used = 0;  // bytes handed out since the slot was last recycled
    cudaEvent_t copied = nullptr;
  };
  static constexpr size_t kSlotBytes = size_t(4) << 20;
  static constexpr int kNumSlots = 4;

  struct Block {
    void* ptr;
    size_t size;  // the block's own size, >= the size asked for
  };
  StagingSlot& slot_with_room(size_t bytes);  // the current slot, or the next when full
  Block take_block(size_t size);  // from the free lists or the driver
  void* driver_malloc(size_t size);  // nullptr when the driver (or the test limit) refuses
  void release_cached();  // free blocks no graph may use, back to the driver (mutex_ held)
  void give_back(void* ptr, size_t size);
  void release_all() noexcept;  // frees everything (constructor failure, destructor)

  int device_;
  cudaStream_t stream_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // block size -> free blocks of that size
  std::vector<void*> driver_blocks_;   // every block cudaMalloc returned and still held
  std::unordered_set<void*> graph_blocks_;  // handed out during a capture: never freed
  bool capturing_ = false;
  int64_t reserved_ = 0;
  int64_t reserve_limit_ = 0;  // tests only
  void* workspace_ = nullptr;
  std::mutex staging_mutex_;
  std::array<StagingSlot, kNumSlots> slots_{};
  int current_slot_ = 0;
};

}  // namespace tandem
