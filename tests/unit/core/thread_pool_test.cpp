// ThreadPool: every index of a job is run exactly once, in chunks that tile [0, n), for
// any thread and chunk count; thousands of back-to-back jobs (the spin handoff) and jobs
// after the workers fell asleep (the futex handoff) both complete.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace tandem {
namespace thread_pool_test {

// Runs one job and checks that its chunks cover [0, n) exactly once.
void expect_exact_cover(ThreadPool& pool, int64_t n, int64_t max_chunks) {
  std::vector<std::atomic<int>> hits(size_t(n > 0 ? n : 1));
  std::atomic<int64_t> calls{0};
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        calls++;
        for (int64_t i = begin; i < end; i++) hits[size_t(i)]++;
      },
      max_chunks);
  for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i;
  if (max_chunks > 0) {
    EXPECT_LE(calls.load(), max_chunks);
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000})
      for (int64_t chunks : {0, 1, 3, 100}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, n " << n << ", chunks " << chunks);
        expect_exact_cover(pool, n, chunks);
      }
  }
}

TEST(ThreadPool, BackToBackJobsAllFinish) {
  ThreadPool pool(4);
  int64_t total = 0;
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 5000; job++) {
    pool.parallel_for(16, [&](int64_t b, int64_t e) { sum += e - b; });
    total += 16;
  }
  EXPECT_EQ(sum.load(), total);
}

TEST(ThreadPool, WakesWorkersThatFellAsleep) {
  ThreadPool pool(3);
  for (int round = 0; round < 3; round++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin window
    std::vector<std::thread::id> ids(30);
    pool.parallel_for(30, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; i++) ids[size_t(i)] = std::this_thread::get_id();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }, 30);
    for (const auto& id : ids) EXPECT_NE(id, std::thread::id{});
  }
}

TEST(ThreadPool, GlobalSizeIsFixedOnceUsed) {
  const int n = ThreadPool::global().num_threads();
  EXPECT_GE(n, 1);
  EXPECT_NO_THROW(ThreadPool::set_global_threads(n));
  EXPECT_THROW(ThreadPool::set_global_threads(n + 1), Error);
  EXPECT_THROW(ThreadPool::set_global_threads(0), Error);
  EXPECT_EQ(ThreadPool::global().num_threads(), n);
}

}  // namespace thread_pool_test
}  // namespace tandem
