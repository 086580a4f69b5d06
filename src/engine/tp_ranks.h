// The ranks of a tensor-parallel group (docs/tensor-parallel.md): N threads of one process,
// rank r holding its slices of the model (model/tp_slices.h) on its own backend.
//   - CPU ranks: each a CPU backend over its own thread pool, meeting in an in-memory
//     communicator (backend/cpu/cpu_communicator.h).
//   - GPU ranks: rank r on GPU r with its own CUDA backend (one stream), meeting in NCCL
//     (backend/cuda/nccl_communicator.h), each collective on the rank's stream.
// Rank 0 is the caller's: its backend and model are the ones a command already holds
// (LoadedModel), so whatever reads the model's config or samples reads rank 0's. Rank r ≥ 1
// runs on its own thread, bound to its device (bind_thread): every op of rank r — a step,
// allocating its KV cache, installing an adapter — goes through run(), never the caller's
// thread, whose device stays rank 0's.
#pragma once

#include <condition_variable>
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

  // Runs fn(r) on every rank at once (rank 0 on the calling thread) and returns when all
  // have. A rank that throws aborts the communicator, so no rank waits for it in a
  // collective; the first error is rethrown once every rank has stopped.
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
  void finish(int rank, std::exception_ptr error);
  void abort_comms();

  std::unique_ptr<CpuCommHub> hub_;                  // CPU ranks
  std::vector<std::unique_ptr<Communicator>> nccl_;  // GPU ranks: [N]
  std::vector<Backend*> backends_;                   // [N]
  std::vector<Model*> models_;                       // [N]
  std::vector<OwnedRank> owned_;                     // ranks 1..N−1
  std::vector<std::thread> threads_;                 // rank r ≥ 1 runs on threads_[r − 1]

  std::mutex mutex_;
  std::condition_variable cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t job_id_ = 0;
  int running_ = 0;  // workers still in the current job
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace tandem
