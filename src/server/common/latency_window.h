// Latency percentiles over a trailing window (the last minute), for /stats and the
// dashboard. The Prometheus histograms (server_metrics.h) count everything since start in
// vLLM's coarse buckets — the first inter-token bucket is 10 ms, more than a small model's
// whole step — so they cannot say what p50 is now. This keeps one histogram per second of
// the window, in fine log-spaced bins (each 5% wider than the one before, from 10 µs to
// about 45 min), so a percentile is known to within 2.5%, memory is fixed (window × bins
// counters) and observe() costs one bin increment.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace tandem::server {

class LatencyWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kMinSeconds = 1e-5;  // bin 0 holds everything below
  static constexpr double kBinRatio = 1.05;
  static constexpr int kNumBins = 400;  // the last bin holds everything above

  explicit LatencyWindow(std::chrono::seconds window = std::chrono::seconds(60),
                         Clock::time_point start = Clock::now());

  void observe(double seconds, Clock::time_point now = Clock::now());

  struct Summary {
    uint64_t count = 0;                   // observations in the window
    std::optional<double> p50, p90, p99;  // nullopt when count is 0
  };
  Summary summary(Clock::time_point now = Clock::now()) const;

  // The bin of a value, and the value a bin stands for (its geometric middle).
  static int bin_of(double seconds);
  static double value_of(int bin);

 private:
  struct Slot {
    std::optional<int64_t> second;  // which second since start_ it counts; none yet
    std::vector<uint32_t> counts;   // [kNumBins]
  };
  int64_t second_of(Clock::time_point t) const;

  std::chrono::seconds window_;
  Clock::time_point start_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // [window seconds], slot s % window holds second s
};

}  // namespace tandem::server
