#include "backend/cpu/cpu_communicator.h"

#include <cstring>

#include "core/error.h"

namespace tandem {
namespace {

class CpuRankComm final : public Communicator {
 public:
  CpuRankComm(CpuCommHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }

  void all_reduce_sum(Tensor& x) override {
    TANDEM_CHECK(x.dtype == DType::F32 && x.device == Device::CPU,
                 "all_reduce_sum: CPU ranks reduce host f32 tensors (got {})", dtype_name(x.dtype));
    post(x.data, x.numel());
    const int64_t n = x.numel(), N = size();
    for (int r = 0; r < N; r++)
      TANDEM_CHECK(hub_.counts[size_t(r)] == n,
                   "all_reduce_sum: rank {} has {} elements, rank {} {}", r, hub_.counts[size_t(r)],
                   rank_, n);
    const int64_t begin = n * rank_ / N, end = n * (rank_ + 1) / N;
    for (int64_t i = begin; i < end; i++) {
      float sum = static_cast<const float*>(hub_.slots[0])[i];
      for (int r = 1; r < N; r++) sum += static_cast<const float*>(hub_.slots[size_t(r)])[i];
      for (int r = 0; r < N; r++) static_cast<float*>(hub_.slots[size_t(r)])[i] = sum;
    }
    hub_.arrive_and_wait();  // no buffer is read or written after this
  }

  void all_gather_columns(Tensor& out, const Tensor& local) override {
    const int64_t R = local.rows(), C = local.cols(), N = size();
    TANDEM_CHECK(out.dtype == local.dtype && out.rows() == R && out.cols() == N * C,
                 "all_gather_columns: out {} for pieces {}", out.shape.str(), local.shape.str());
    post(local.data, local.numel());
    const size_t esize = dtype_size(local.dtype);
    for (int r = 0; r < N; r++) {
      TANDEM_CHECK(hub_.counts[size_t(r)] == R * C,
                   "all_gather_columns: rank {} has {} elements, rank {} {}", r,
                   hub_.counts[size_t(r)], rank_, R * C);
      const char* src = static_cast<const char*>(hub_.slots[size_t(r)]);
      for (int64_t row = 0; row < R; row++)
        std::memcpy(static_cast<char*>(out.data) + size_t(row * N * C + r * C) * esize,
                    src + size_t(row * C) * esize, size_t(C) * esize);
    }
    hub_.arrive_and_wait();
  }

  void broadcast(std::span<int32_t> ids, int root) override {
    TANDEM_CHECK(root >= 0 && root < size(), "broadcast: root {} of {} ranks", root, size());
    post(ids.data(), int64_t(ids.size()));
    TANDEM_CHECK(hub_.counts[size_t(root)] == int64_t(ids.size()),
                 "broadcast: rank {} has {} ids, the root {}", rank_, ids.size(),
                 hub_.counts[size_t(root)]);
    if (rank_ != root)
      std::memcpy(ids.data(), hub_.slots[size_t(root)], ids.size() * sizeof(int32_t));
    hub_.arrive_and_wait();
  }

  // The ranks' tensors are host memory (CPU backends): the same rendezvous as host ids.
  void broadcast_ids(Tensor& ids, int root) override {
    TANDEM_CHECK(ids.device == Device::CPU && ids.dtype == DType::I32 && ids.ndim() == 1,
                 "broadcast_ids: rank {} has {} {} ids, not [S] i32 in host memory", rank_,
                 ids.shape.str(), dtype_name(ids.dtype));
    broadcast(std::span<int32_t>(ids.ptr<int32_t>(), size_t(ids.numel())), root);
  }

  void barrier() override { hub_.arrive_and_wait(); }
  void abort() override { hub_.abort(); }
  void reset() override { hub_.reset(); }

 private:
  // Posts this rank's buffer and waits until every rank has posted its own.
  void post(void* data, int64_t count) {
    hub_.slots[size_t(rank_)] = data;
    hub_.counts[size_t(rank_)] = count;
    hub_.arrive_and_wait();
  }

  CpuCommHub& hub_;
  int rank_;
};

}  // namespace

CpuCommHub::CpuCommHub(int size) : slots(size_t(size)), counts(size_t(size)), size_(size) {
  TANDEM_CHECK(size >= 1, "CpuCommHub: {} ranks", size);
  for (int r = 0; r < size; r++) ranks_.push_back(std::make_unique<CpuRankComm>(*this, r));
}

void CpuCommHub::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (aborted_) fail("tensor parallelism: another rank failed; this step is abandoned");
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    generation_++;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation)
    fail("tensor parallelism: another rank failed; this step is abandoned");
}

void CpuCommHub::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void CpuCommHub::reset() {
  std::lock_guard lock(mutex_);
  aborted_ = false;
  arrived_ = 0;
}

}  // namespace tandem
