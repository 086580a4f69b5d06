#include "engine/tp_ranks.h"

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace tandem {

TpRanks::TpRanks(int size) : hub_(std::make_unique<CpuCommHub>(size)) {}

std::shared_ptr<TpRanks> TpRanks::load(const std::filesystem::path& dir, int size,
                                       LoadOptions options, Backend& backend0,
                                       std::unique_ptr<Model>& model0) {
  if (size < 1 || size > 64) fail("--tensor-parallel-size must be 1..64 (got {})", size);
  if (backend0.device() != Device::CPU)
    fail(
        "--tensor-parallel-size {}: tensor parallelism runs on CPU ranks only in this build "
        "(use --device cpu)",
        size);
  std::shared_ptr<TpRanks> ranks(new TpRanks(size));
  const int threads = std::max(1, (ThreadPool::global().num_threads() + size - 1) / size);
  for (int r = 0; r < size; r++) {
    options.tp = TpShard{.rank = r, .size = size, .comm = &ranks->comm(r)};
    if (r == 0) {
      model0 = load_model(dir, backend0, options);
      ranks->backends_.push_back(&backend0);
      ranks->models_.push_back(model0.get());
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
    ranks->backends_.push_back(rank.backend.get());
    ranks->models_.push_back(rank.model.get());
    ranks->owned_.push_back(std::move(rank));
  }
  for (int r = 1; r < size; r++)
    ranks->threads_.emplace_back([p = ranks.get(), r] { p->worker(r); });
  return ranks;
}

TpRanks::~TpRanks() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TpRanks::finish(int rank, std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (error && !error_) error_ = error;
  if (rank > 0) running_--;
  cv_.notify_all();
}

void TpRanks::worker(int rank) {
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
      hub_->abort();
    }
    finish(rank, error);
  }
}

void TpRanks::run(const std::function<void(int)>& fn) {
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
    hub_->abort();
  }
  finish(0, error);
  std::exception_ptr first;
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return running_ == 0; });
    first = error_;
    job_ = nullptr;
  }
  hub_->reset();  // no rank is inside a collective now
  if (first) std::rethrow_exception(first);
}

}  // namespace tandem
