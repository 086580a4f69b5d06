// A fixed pool of worker threads for data-parallel loops on the CPU backend.
// parallel_for splits [0, n) into contiguous chunks, one per worker, and returns when
// all are done; the calling thread works too. Not re-entrant: ops call it once each.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // total threads including the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return int(workers_.size()) + 1; }
  // fn(begin, end) over disjoint chunks covering [0, n).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool (sized by TANDEM_THREADS or the hardware).
  static ThreadPool& global();

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace tandem
