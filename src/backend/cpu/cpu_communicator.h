// The in-memory Communicator (backend/communicator.h) of N CPU ranks that are threads of
// one process: a hub the ranks share, and one Communicator per rank that posts the
// addresses of its tensors there. Tensors are host memory (the CPU backend's), f32.
//
// all_reduce_sum: after every rank has posted its buffer, rank r sums elements
// [r·n/N, (r+1)·n/N) of all buffers in rank order (x_0 + x_1 + ... left to right) and
// writes the sum back into every buffer; a second barrier ends the call. Each element is
// summed by one rank in one fixed order, so the result does not depend on thread timing.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/communicator.h"

namespace tandem {

class CpuCommHub {
 public:
  explicit CpuCommHub(int size);
  int size() const { return size_; }
  // The communicator of rank r (owned by the hub).
  Communicator& rank(int r) { return *ranks_[size_t(r)]; }

  // Rendezvous of all ranks; throws tandem::Error once the hub is aborted.
  void arrive_and_wait();
  void abort();
  void reset();

  // Per-rank addresses posted for the collective in progress.
  std::vector<void*> slots;
  std::vector<int64_t> counts;

 private:
  int size_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

}  // namespace tandem
