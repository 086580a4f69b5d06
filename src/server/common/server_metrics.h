// What the server measures itself, from chunk arrival times on the HTTP side: time to
// first token, inter-token latency, end-to-end latency, queue time, and generated tokens
// per second over the last minute. Rendered with the engine's counters as Prometheus
// text (vLLM's metric names under a `tandem:` prefix) and as /stats JSON.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "server/common/json_text.h"
#include "server/common/latency_window.h"

namespace tandem::server {

using Clock = std::chrono::steady_clock;

// Prompt tokens found in the prefix cache per prompt token looked up (0 before any).
double prefix_hit_rate(const EngineStats& stats);

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implied
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // [num_bounds + 1]: counts <= bound, last = all
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [num_bounds + 1], per bucket (not cumulative)
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Events per second over a trailing window, kept as per-second buckets.
class RateMeter {
 public:
  explicit RateMeter(std::chrono::seconds window = std::chrono::seconds(60));
  void add(int64_t n, Clock::time_point now = Clock::now());
  double per_second(Clock::time_point now = Clock::now()) const;

 private:
  void prune(int64_t now_s) const;

  mutable std::mutex mu_;
  std::chrono::seconds window_;
  Clock::time_point start_;
  mutable std::deque<std::pair<int64_t, int64_t>> buckets_;  // (second since start, count)
};

class ServerMetrics {
 public:
  ServerMetrics();

  void observe_time_to_first_token(double seconds) {
    ttft_.observe(seconds);
    ttft_1m_.observe(seconds);
  }
  void observe_inter_token_latency(double seconds) {
    itl_.observe(seconds);
    itl_1m_.observe(seconds);
  }
  void observe_e2e_latency(double seconds) {
    e2e_.observe(seconds);
    e2e_1m_.observe(seconds);
  }
  void observe_queue_time(double seconds) { queue_.observe(seconds); }
  void count_generated(int64_t tokens) { generated_.add(tokens); }
  void count_finished(FinishReason reason);

  double uptime_seconds() const;
  double generated_tokens_per_second() const { return generated_.per_second(); }

  // Prometheus text exposition format (version 0.0.4).
  std::string prometheus(const EngineStats& stats, const std::string& model_name) const;
  // /stats: the engine's numbers (KV blocks in total and per group), the server's rates
  // and last-minute latency percentiles, and `card` (static facts such as batch size or
  // dtype that the CLI knows) merged in.
  Json stats_json(const EngineStats& stats, const ModelInfo& model, const Json& card) const;

 private:
  Clock::time_point start_;
  Histogram ttft_, itl_, e2e_, queue_;
  LatencyWindow ttft_1m_, itl_1m_, e2e_1m_;  // the same, over the last minute (/stats)
  RateMeter generated_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> finished_;  // finish reason → requests
};

}  // namespace tandem::server
