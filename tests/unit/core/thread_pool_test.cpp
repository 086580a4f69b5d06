// ThreadPool::parallel_for: every index of [0, n) exactly once, in contiguous chunks,
// whatever n and the thread count; repeated calls reuse the same workers.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace tandem {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 5, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {
        {
          std::lock_guard<std::mutex> lock(mu);
          chunks.emplace_back(begin, end);
        }
        for (int64_t i = begin; i < end; i++) hits[size_t(i)]++;
      });
      for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[size_t(i)], 1) << threads << " threads, n " << n;
      EXPECT_LE(int(chunks.size()), threads);
      for (auto [b, e] : chunks) EXPECT_LT(b, e);  // no empty chunks are handed out
    }
  }
}

TEST(ThreadPool, RunsOnSeveralThreadsAndAgainAndAgain) {
  ThreadPool pool(4);
  std::set<std::thread::id> seen;
  std::mutex mu;
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 200; round++)
    pool.parallel_for(4, [&](int64_t begin, int64_t end) {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::this_thread::get_id());
      total += end - begin;
    });
  EXPECT_EQ(total, 800);
  EXPECT_EQ(seen.size(), 4u);  // each chunk of four goes to its own thread
}

}  // namespace
}  // namespace tandem
