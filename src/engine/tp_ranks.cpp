#include "engine/tp_ranks.h"

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/tp_ops.h"
#include "core/error.h"

namespace tandem {

std::shared_ptr<TpRanks> TpRanks::load(const std::filesystem::path& dir, int size,
                                       LoadOptions options, Backend& backend0,
                                       std::unique_ptr<Model>& model0, const CudaOptions& cuda) {
  if (size < 1 || size > 64) fail("--tensor-parallel-size must be 1..64 (got {})", size);
  std::shared_ptr<TpRanks> ranks(new TpRanks());
  if (backend0.device() == Device::CUDA)
    ranks->load_cuda(dir, size, options, backend0, model0, cuda);
  else if (backend0.device() == Device::CPU)
    ranks->load_cpu(dir, size, options, backend0, model0);
  else
    fail("--tensor-parallel-size {}: no tensor parallelism on {}", size, backend0.name());
  for (int r = 1; r < size; r++)
    ranks->threads_.emplace_back([p = ranks.get(), r] { p->worker(r); });
  return ranks;
}

void TpRanks::load_cpu(const std::filesystem::path& dir, int size, LoadOptions options,
                       Backend& backend0, std::unique_ptr<Model>& model0) {
  hub_ = std::make_unique<CpuCommHub>(size);
  const int threads = std::max(1, (ThreadPool::global().num_threads() + size - 1) / size);
  for (int r = 0; r < size; r++) {
    options.tp = TpShard{.rank = r, .size = size, .comm = &comm(r)};
    if (r == 0) {
      model0 = load_model(dir, backend0, options);
      backends_.push_back(&backend0);
      models_.push_back(model0.get());
      continue;
    }
    OwnedRank rank;
    rank.pool = std::make_unique<ThreadPool>(threads);
    auto cpu = std::make_unique<CpuBackend>(rank.pool.get());
    // Block weights (GGUF) compute as rank 0's do, so the ranks' partial sums agree.
    if (auto* cpu0 = dynamic_cast<CpuBackend*>(&backend0))
      cpu->set_block_arithmetic(cpu0->block_arithmetic());
    rank.backend = std::move(cpu);
    rank.model = load_model(dir, *rank.backend, options);
    backends_.push_back(rank.backend.get());
    models_.push_back(rank.model.get());
    owned_.push_back(std::move(rank));
  }
}

// Rank r on GPU r. The backends first (NCCL needs every rank's stream), then the
// communicators, then each rank's slices with its GPU current on this thread; the caller's
// thread is bound back to rank 0's GPU at the end.
void TpRanks::load_cuda(const std::filesystem::path& dir, int size, LoadOptions options,
                        Backend& backend0, std::unique_ptr<Model>& model0,
                        const CudaOptions& cuda) {
  if (!nccl_available())
    fail(
        "--tensor-parallel-size {} on --device cuda needs NCCL, and this tandem was built "
        "without it (-DTANDEM_NCCL=ON where nccl.h and libnccl are found, or NCCL_ROOT)",
        size);
  const int gpus = cuda_device_count();
  if (size > gpus)
    fail("--tensor-parallel-size {} on --device cuda needs {} GPUs; this machine has {}", size,
         size, gpus);
  backends_.push_back(&backend0);
  for (int r = 1; r < size; r++) {
    OwnedRank rank;
    rank.backend = make_cuda_backend(r, cuda);
    backends_.push_back(rank.backend.get());
    owned_.push_back(std::move(rank));
  }
  bind_thread(backend0);
  nccl_ = make_nccl_communicators(backends_);
  for (int r = 0; r < size; r++) {
    options.tp = TpShard{.rank = r, .size = size, .comm = &comm(r)};
    bind_thread(*backends_[size_t(r)]);
    std::unique_ptr<Model>& model = r == 0 ? model0 : owned_[size_t(r - 1)].model;
    model = load_model(dir, *backends_[size_t(r)], options);
    backends_[size_t(r)]->synchronize();
    models_.push_back(model.get());
  }
  bind_thread(backend0);
}

void TpRanks::abort_comms() {
  if (hub_) hub_->abort();
  for (auto& c : nccl_) c->abort();
}

TpRanks::~TpRanks() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  nccl_.clear();  // before the ranks' backends (their streams)
}

void TpRanks::finish(int rank, std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (error && !error_) error_ = error;
  if (rank > 0) running_--;
  cv_.notify_all();
}

void TpRanks::worker(int rank) {
  bind_thread(*backends_[size_t(rank)]);  // this thread drives rank `rank`'s device
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || job_id_ != seen; });
      if (stop_) return;
      seen = job_id_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(rank);
    } catch (...) {
      error = std::current_exception();
      abort_comms();
    }
    finish(rank, error);
  }
}

void TpRanks::run(const std::function<void(int)>& fn) {
  if (!nccl_.empty()) bind_thread(*backends_[0]);  // whichever thread calls: rank 0's GPU
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_id_++;
    running_ = size() - 1;
    error_ = nullptr;
  }
  cv_.notify_all();
  std::exception_ptr error;
  try {
    fn(0);
  } catch (...) {
    error = std::current_exception();
    abort_comms();
  }
  finish(0, error);
  std::exception_ptr first;
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return running_ == 0; });
    first = error_;
    job_ = nullptr;
  }
  // CPU: no rank is inside a collective now. NCCL: an aborted communicator stays aborted (its
  // next collective fails, naming it); the group must be loaded again.
  if (hub_) hub_->reset();
  if (first) std::rethrow_exception(first);
}

}  // namespace tandem
