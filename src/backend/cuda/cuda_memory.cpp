#include "backend/cuda/cuda_memory.h"

#include <bit>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace tandem {

namespace {

constexpr size_t kMinBlock = 512;
constexpr size_t kSmallLimit = size_t(1) << 20;  // up to here: four size classes per octave
constexpr size_t kLargeGranule = size_t(2) << 20;

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// A large free block may serve a request up to 1/8 smaller than itself: sizes that vary a
// little from step to step (prefill chunks) reuse blocks instead of growing the cache.
size_t largest_acceptable(size_t size) {
  return size <= kSmallLimit ? size : size + size / 8;
}

}  // namespace

size_t CudaAllocator::block_size_for(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  if (bytes <= kSmallLimit) return round_up(bytes, std::bit_floor(bytes - 1) / 4);
  return round_up(bytes, kLargeGranule);
}

CudaAllocator::CudaAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {
  try {
    for (StagingSlot& slot : slots_) {
      cuda_check(cudaMallocHost(reinterpret_cast<void**>(&slot.host), kSlotBytes),
                 "cudaMallocHost (staging ring)");
      cuda_check(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming),
                 "cudaEventCreate (staging ring)");
    }
    workspace_ = take_block(kWorkspaceBytes).ptr;
  } catch (...) {
    release_all();
    throw;
  }
}

CudaAllocator::~CudaAllocator() {
  release_all();
}

void CudaAllocator::release_all() noexcept {
  // Errors are ignored: at process exit the CUDA runtime may already be gone.
  for (StagingSlot& slot : slots_) {
    if (slot.copied) {
      cudaEventSynchronize(slot.copied);
      cudaEventDestroy(slot.copied);
    }
    if (slot.host) cudaFreeHost(slot.host);
    slot = {};
  }
  for (void* p : driver_blocks_) cudaFree(p);
  driver_blocks_.clear();
  free_.clear();
  reserved_ = 0;
}

CudaAllocator::Block CudaAllocator::take_block(size_t size) {
  std::lock_guard lock(mutex_);
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= largest_acceptable(size)) {
    const Block b{it->second, it->first};
    free_.erase(it);
    if (capturing_) graph_blocks_.insert(b.ptr);
    return b;
  }
  void* p = driver_malloc(size);
  if (p == nullptr && !capturing_ && !free_.empty()) {
    // Full, but some of it is cached: wait for the kernels that may still read freed
    // blocks, give the cache back and try once more.
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (allocator)");
    release_cached();
    p = driver_malloc(size);
  }
  if (p == nullptr) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    fail(
        "CUDA out of memory allocating {} bytes on device {} ({} reserved by tandem, {} free "
        "of {})",
        size, device_, reserved_, free_bytes, total);
  }
  driver_blocks_.push_back(p);
  reserved_ += int64_t(size);
  if (capturing_) graph_blocks_.insert(p);
  return {p, size};
}

void* CudaAllocator::driver_malloc(size_t size) {
  if (reserve_limit_ > 0 && reserved_ + int64_t(size) > reserve_limit_) return nullptr;
  // cudaMalloc uses the calling thread's current device.
  cuda_check(cudaSetDevice(device_), "cudaSetDevice (allocator)");
  void* p = nullptr;
  if (cudaMalloc(&p, size) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error state of the failed call
    return nullptr;
  }
  return p;
}

void CudaAllocator::release_cached() {
  std::unordered_set<void*> released;
  for (auto it = free_.begin(); it != free_.end();) {
    if (graph_blocks_.count(it->second) != 0) {
      ++it;
      continue;
    }
    cudaFree(it->second);
    released.insert(it->second);
    reserved_ -= int64_t(it->first);
    it = free_.erase(it);
  }
  std::erase_if(driver_blocks_, [&](void* p) { return released.count(p) != 0; });
}

void CudaAllocator::set_capturing(bool capturing) {
  std::lock_guard lock(mutex_);
  capturing_ = capturing;
}

void CudaAllocator::set_reserve_limit_for_tests(int64_t bytes) {
  std::lock_guard lock(mutex_);
  reserve_limit_ = bytes;
}

void CudaAllocator::give_back(void* ptr, size_t size) {
  std::lock_guard lock(mutex_);
  free_.emplace(size, ptr);
}

std::shared_ptr<void> CudaAllocator::allocate(size_t bytes) {
  // The block may be larger than asked (a reused one): it goes back under its own size.
  const Block b = take_block(block_size_for(bytes));
  std::shared_ptr<CudaAllocator> self = shared_from_this();
  return std::shared_ptr<void>(b.ptr, [self, size = b.size](void* p) { self->give_back(p, size); });
}

CudaAllocator::StagingSlot& CudaAllocator::slot_with_room(size_t bytes) {
  StagingSlot* slot = &slots_[size_t(current_slot_)];
  if (kSlotBytes - slot->used < bytes) {
    // Recycle the next slot: its last copy was queued a whole ring ago, usually long done.
    current_slot_ = (current_slot_ + 1) % kNumSlots;
    slot = &slots_[size_t(current_slot_)];
    cuda_check(cudaEventSynchronize(slot->copied), "cudaEventSynchronize (staging ring)");
    slot->used = 0;
  }
  return *slot;
}

void CudaAllocator::write_async(void* dst, const void* src, size_t bytes) {
  std::lock_guard lock(staging_mutex_);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  while (bytes > 0) {
    StagingSlot& slot = slot_with_room(1);
    const size_t n = std::min(bytes, kSlotBytes - slot.used);
    char* staged = slot.host + slot.used;
    std::memcpy(staged, from, n);
    cuda_check(cudaMemcpyAsync(to, staged, n, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (host to device)");
    cuda_check(cudaEventRecord(slot.copied, stream_), "cudaEventRecord (staging ring)");
    slot.used += n;
    from += n;
    to += n;
    bytes -= n;
  }
}

void CudaAllocator::write_rows_async(void* dst, size_t dst_pitch, const void* src,
                                     size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return;
  if (row_bytes > kSlotBytes) {  // rows too wide to stage whole: one write each
    for (size_t r = 0; r < rows; r++)
      write_async(static_cast<char*>(dst) + r * dst_pitch,
                  static_cast<const char*>(src) + r * row_bytes, row_bytes);
    return;
  }
  std::lock_guard lock(staging_mutex_);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  while (rows > 0) {
    StagingSlot& slot = slot_with_room(row_bytes);
    const size_t n = std::min(rows, (kSlotBytes - slot.used) / row_bytes);
    char* staged = slot.host + slot.used;
    std::memcpy(staged, from, n * row_bytes);
    cuda_check(cudaMemcpy2DAsync(to, dst_pitch, staged, row_bytes, row_bytes, n,
                                 cudaMemcpyHostToDevice, stream_),
               "cudaMemcpy2DAsync (host to device)");
    cuda_check(cudaEventRecord(slot.copied, stream_), "cudaEventRecord (staging ring)");
    slot.used += n * row_bytes;
    from += n * row_bytes;
    to += n * dst_pitch;
    rows -= n;
  }
}

int64_t CudaAllocator::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

int64_t CudaAllocator::num_driver_allocations() const {
  std::lock_guard lock(mutex_);
  return int64_t(driver_blocks_.size());
}

}  // namespace tandem
