// A fixed pool of worker threads for the data-parallel loops of the CPU backend: one per
// process (global()), sized once (set_global_threads: --threads or TANDEM_THREADS, read by
// the cli; else the physical cores).
// parallel_for splits [0, n) into contiguous chunks that the workers and the calling
// thread take in turn, and returns when all are done. Not re-entrant: an op calls it and
// waits, and no chunk calls it again.
//
// Between jobs a worker spins for a short while before it sleeps: a decode step runs
// about a hundred parallel ops a few microseconds apart, and waking a sleeping thread
// costs more than most of those ops. An idle pool sleeps (futex waits), so an idle
// server burns no CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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
  // fn(begin, end) over disjoint chunks covering [0, n): at most `max_chunks` of them
  // (0: four per thread), taken by whichever thread is free, so a thread the OS
  // preempts delays the op by one chunk rather than by its share.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t max_chunks = 0);

  // The process-wide pool. Its size: set_global_threads() if called first, else the
  // physical cores this process may run on.
  static ThreadPool& global();
  // Sizes the global pool; call before its first use (a later call with another size
  // fails, since ops hold references to it). n >= 1.
  static void set_global_threads(int n);

 private:
  void worker_loop();
  void run_chunks(uint32_t job);

  std::vector<std::thread> workers_;
  // The current job, published by generation_ (release) and claimed chunk by chunk
  // through claim_. A worker that wakes late finds the job's chunks all claimed (or the
  // job id moved on) and runs nothing: the caller waits for chunks done, never for
  // every worker to check in, so a worker the OS has descheduled delays nobody.
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> job_n_{0}, job_chunks_{0};
  std::atomic<uint64_t> claim_{0};       // (job id << 32) | next chunk to claim
  std::atomic<int64_t> done_{0};         // chunks of the current job finished
  std::atomic<uint32_t> generation_{0};  // the current job id (workers wait on it)
  uint32_t last_job_ = 0;                // the caller's job counter
  std::atomic<bool> stop_{false};
};

}  // namespace tandem
