#include "engine/tp_ranks.h"

#include <algorithm>
#include <utility>

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
  ranks->done_.assign(size_t(size), 0);
  for (int r = 0; r < size; r++)
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
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  nccl_.clear();  // before the ranks' backends (their streams)
}

uint64_t TpRanks::done_by_all() const {
  return done_.empty() ? posted_ : *std::min_element(done_.begin(), done_.end());
}

// Rank `rank`'s thread: its jobs in posted order. A job is skipped while an earlier one's
// error waits to be rethrown (its inputs may be missing; its collectives would fail).
void TpRanks::worker(int rank) {
  bind_thread(*backends_[size_t(rank)]);  // this thread drives rank `rank`'s device
  for (;;) {
    std::shared_ptr<const std::function<void(int)>> job;
    bool skip = false;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || done_[size_t(rank)] < posted_; });
      if (stop_) return;
      job = jobs_[size_t(done_[size_t(rank)] - first_job_)];
      skip = error_ != nullptr;
    }
    if (!skip) {
      try {
        (*job)(rank);
      } catch (...) {
        {  // recorded before the abort, so that the cause wins over the ranks it releases
          std::lock_guard lock(mutex_);
          if (!error_) error_ = std::current_exception();
        }
        abort_comms();
      }
    }
    std::lock_guard lock(mutex_);
    done_[size_t(rank)]++;
    while (!jobs_.empty() && done_by_all() > first_job_) {  // every rank is past the front job
      jobs_.pop_front();
      first_job_++;
    }
    done_cv_.notify_all();
  }
}

uint64_t TpRanks::post(std::function<void(int)> fn) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::make_shared<const std::function<void(int)>>(std::move(fn)));
    id = ++posted_;
  }
  work_cv_.notify_all();
  return id;
}

void TpRanks::wait(uint64_t id) {
  std::exception_ptr first;
  {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return error_ != nullptr || done_by_all() >= id; });
    if (!error_) return;
    // Every job after the failed one is skipped: wait for them all, so that no rank is in a
    // collective or between two jobs' halves when the group is reset.
    done_cv_.wait(lock, [&] { return done_by_all() >= posted_; });
    first = std::exchange(error_, nullptr);
  }
  // CPU: no rank is inside a collective now. NCCL: an aborted communicator stays aborted (its
  // next collective fails, naming it); the group must be loaded again.
  if (hub_) hub_->reset();
  std::rethrow_exception(first);
}

void TpRanks::drain() {
  uint64_t last = 0;
  {
    std::lock_guard lock(mutex_);
    last = posted_;
  }
  wait(last);
}

void TpRanks::run(const std::function<void(int)>& fn) {
  if (!nccl_.empty()) bind_thread(*backends_[0]);  // whichever thread calls: rank 0's GPU
  wait(post([&fn](int r) { fn(r); }));
}

}  // namespace tandem
