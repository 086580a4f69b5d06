// The ranks of a tensor-parallel group (docs/tensor-parallel.md): N threads of one process,
// rank r holding its slices of the model (model/tp_slices.h) on its own backend.
//   - CPU ranks: each a CPU backend over its own thread pool, meeting in an in-memory
//     communicator (backend/cpu/cpu_communicator.h).
//   - GPU ranks: rank r on GPU r with its own CUDA backend (one stream), meeting in NCCL
//     (backend/cuda/nccl_communicator.h), each collective on the rank's stream.
// Rank 0's backend and model are the caller's: the ones a command already holds
// (LoadedModel), so whatever reads the model's config reads rank 0's. Every rank r, rank 0
// included, runs its ops on a thread of its own, bound to its device (bind_thread), taking
// jobs from its own in-order queue: every op of a rank — a step, allocating its KV cache,
// installing an adapter — goes through post() or run(), and a job reaches every rank in the
// order it was posted, so the ranks meet in their collectives in the same order. The
// caller's thread stays bound to rank 0's device.
//
// Errors: a job that throws on a rank aborts the communicator (no rank waits for it in a
// collective), and every later job is skipped on every rank until wait() or drain() has
// rethrown the first error — which it does only once every posted job has finished or been
// skipped, so no rank is left in a collective when the communicator is reset.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_communicator.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace tandem {

class TpRanks {
 public:
  // Loads `dir` as `size` shards: rank 0 on `backend0` into `model0`, rank r ≥ 1 on a
  // backend of its own — on the CPU a pool of ⌈threads / size⌉ threads; on CUDA GPU r (rank
  // 0 is GPU 0's backend0), made with `cuda`. Each rank reads only its slices. Throws
  // tandem::Error as load_model does; when N does not divide a dimension the split needs
  // (naming it); on CUDA when the build has no NCCL or N exceeds the GPUs.
  static std::shared_ptr<TpRanks> load(const std::filesystem::path& dir, int size,
                                       LoadOptions options, Backend& backend0,
                                       std::unique_ptr<Model>& model0,
                                       const CudaOptions& cuda = {});
  ~TpRanks();
  TpRanks(const TpRanks&) = delete;
  TpRanks& operator=(const TpRanks&) = delete;

  int size() const { return int(backends_.size()); }
  Backend& backend(int r) const { return *backends_[size_t(r)]; }
  Model& model(int r) const { return *models_[size_t(r)]; }
  Communicator& comm(int r) const { return hub_ ? hub_->rank(r) : *nccl_[size_t(r)]; }

  // Queues fn(r) on every rank's thread, after every job posted before, and returns at once:
  // the job's id (1, 2, …), for wait(). fn must stay valid until the job has run; it may
  // read what the same rank's earlier jobs wrote (they ran before it, on the same thread).
  uint64_t post(std::function<void(int)> fn);
  // Waits until every rank has run (or skipped) the jobs up to `id`. When a job failed: waits
  // for every posted job, forgets the error (the group runs jobs again) and rethrows it.
  void wait(uint64_t id);
  // Waits for every job posted so far (wait's errors).
  void drain();
  // post(fn) and wait for it: returns once every rank has run fn (and every earlier job).
  void run(const std::function<void(int)>& fn);

 private:
  struct OwnedRank {
    std::unique_ptr<ThreadPool> pool;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Model> model;
  };
  TpRanks() = default;
  void load_cpu(const std::filesystem::path& dir, int size, LoadOptions options, Backend& backend0,
                std::unique_ptr<Model>& model0);
  void load_cuda(const std::filesystem::path& dir, int size, LoadOptions options, Backend& backend0,
                 std::unique_ptr<Model>& model0, const CudaOptions& cuda);
  void worker(int rank);
  void abort_comms();
  uint64_t done_by_all() const;  // under mutex_

  std::unique_ptr<CpuCommHub> hub_;                  // CPU ranks
  std::vector<std::unique_ptr<Communicator>> nccl_;  // GPU ranks: [N]
  std::vector<Backend*> backends_;                   // [N]
  std::vector<Model*> models_;                       // [N]
  std::vector<OwnedRank> owned_;                     // ranks 1..N−1
  std::vector<std::thread> threads_;                 // [N] rank r runs on threads_[r]

  // The jobs, under mutex_: job i (1-based) is jobs_[i − 1 − first_job_]; rank r has
  // finished (run or skipped) jobs 1..done_[r]. A job is dropped once every rank is past it.
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // a job posted, or stop_
  std::condition_variable done_cv_;  // a rank finished a job
  std::deque<std::shared_ptr<const std::function<void(int)>>> jobs_;
  uint64_t first_job_ = 0;  // jobs dropped from the front of jobs_
  uint64_t posted_ = 0;     // the id of the last job posted
  std::vector<uint64_t> done_;
  bool stop_ = false;
  std::exception_ptr error_;  // the first failed job's, until wait() rethrows it
};

}  // namespace tandem
