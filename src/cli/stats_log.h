// The running log line of `tandem serve` (vLLM's periodic "Engine 000: ..." line): every
// interval in which something happened, one line on stderr with the requests running and
// waiting, prompt and generation throughput over the interval, the KV blocks used and
// cached, and the prefix cache's hit rate (over the interval and since start).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine_api.h"

namespace tandem::cli {

// The line for the interval from `before` to `now`, `seconds` long; "" when nothing
// happened in it (no request ran, waited or finished).
std::string stats_line(const EngineStats& before, const EngineStats& now, double seconds);

class StatsLog {
 public:
  StatsLog(const EngineApi& engine, std::chrono::milliseconds interval);
  ~StatsLog();  // stops the thread
  StatsLog(const StatsLog&) = delete;
  StatsLog& operator=(const StatsLog&) = delete;

 private:
  void run();

  const EngineApi& engine_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tandem::cli
