#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "core/cpu_features.h"
#include "core/error.h"

namespace tandem {

namespace {

// How long a thread spins on a changing atomic before it sleeps on it. Long enough to
// bridge the gaps between the ops of one step, short enough that an idle pool is idle.
constexpr auto kSpin = std::chrono::microseconds(200);

// Returns the value of `a` once done(value) holds: spins, then waits.
template <typename T, typename Done>
T await(const std::atomic<T>& a, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; i++) {
    const T v = a.load(std::memory_order_acquire);
    if (done(v)) return v;
    _mm_pause();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
  }
  for (;;) {
    const T v = a.load(std::memory_order_acquire);
    if (done(v)) return v;
    a.wait(v, std::memory_order_acquire);
  }
}

std::mutex g_global_mu;
std::unique_ptr<ThreadPool> g_global;
int g_global_threads = 0;  // 0: not set

int default_threads() {
  return num_physical_cores();
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); i++) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t job) {
  for (;;) {
    uint64_t claim = claim_.load(std::memory_order_acquire);
    if (uint32_t(claim >> 32) != job) return;
    const int64_t c = int64_t(uint32_t(claim)), chunks = job_chunks_.load(std::memory_order_acquire);
    if (c >= chunks) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    // Chunk c of `job` is ours, so the job is unfinished and its fields are current.
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) (*job_.load(std::memory_order_relaxed))(begin, end);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    seen = await(generation_, [&](uint32_t g) { return g != seen; });
    if (stop_.load(std::memory_order_relaxed)) return;
    run_chunks(seen);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t max_chunks) {
  if (n <= 0) return;
  const int64_t chunks = std::min(n, max_chunks > 0 ? max_chunks : 4 * int64_t(num_threads()));
  if (workers_.empty() || chunks == 1) {
    fn(0, n);
    return;
  }
  const uint32_t job = ++last_job_;
  // First a claim with no chunks left under the new id: a late worker that reads the
  // new fields below then fails its claim on the old job.
  claim_.store((uint64_t(job) << 32) | 0xffffffffu, std::memory_order_relaxed);
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunks_.store(chunks, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(uint64_t(job) << 32, std::memory_order_release);
  generation_.store(job, std::memory_order_release);
  generation_.notify_all();
  run_chunks(job);
  await(done_, [&](int64_t d) { return d == chunks; });
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_global_mu);
  if (!g_global) {
    if (g_global_threads == 0) g_global_threads = default_threads();
    g_global = std::make_unique<ThreadPool>(g_global_threads);
  }
  return *g_global;
}

void ThreadPool::set_global_threads(int n) {
  if (n < 1) fail("--threads must be at least 1, got {}", n);
  std::lock_guard<std::mutex> lock(g_global_mu);
  if (g_global && g_global->num_threads() != n)
    fail("the thread pool already runs {} threads; --threads {} comes too late",
         g_global->num_threads(), n);
  g_global_threads = n;
}

}  // namespace tandem
