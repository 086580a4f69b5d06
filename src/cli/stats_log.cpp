#include "cli/stats_log.h"

#include <fmt/format.h>

namespace tandem::cli {

namespace {

double percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0;
}

}  // namespace

std::string stats_line(const EngineStats& before, const EngineStats& now, double seconds) {
  const int64_t prompt = now.prompt_tokens_total - before.prompt_tokens_total;
  const int64_t generated = now.generation_tokens_total - before.generation_tokens_total;
  const int64_t finished = now.requests_finished - before.requests_finished;
  if (now.num_running == 0 && now.num_waiting == 0 && prompt == 0 && generated == 0 && finished == 0)
    return {};
  const double s = seconds > 0 ? seconds : 1.0;
  std::string line = fmt::format(
      "tandem: running {}, waiting {} | prompt {:.1f} tok/s, generation {:.1f} tok/s | "
      "KV blocks used {}/{} ({:.1f}%), cached {}",
      now.num_running, now.num_waiting, double(prompt) / s, double(generated) / s,
      now.kv_blocks_used, now.kv_blocks_total, percent(now.kv_blocks_used, now.kv_blocks_total),
      now.kv_blocks_cached);
  if (!now.prefix_cache_enabled) return line + " | prefix cache off";
  const int64_t queries = now.prefix_cache_queries_total - before.prefix_cache_queries_total;
  const int64_t hits = now.prefix_cache_hits_total - before.prefix_cache_hits_total;
  return line + fmt::format(" | prefix cache hit rate {:.1f}% ({:.1f}% since start)",
                            percent(hits, queries),
                            percent(now.prefix_cache_hits_total, now.prefix_cache_queries_total));
}

StatsLog::StatsLog(const EngineApi& engine, std::chrono::milliseconds interval)
    : engine_(engine), interval_(interval), thread_([this] { run(); }) {}

StatsLog::~StatsLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatsLog::run() {
  EngineStats before = engine_.stats();
  auto last = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [&] { return stopping_; })) {
    const EngineStats now = engine_.stats();
    const auto t = std::chrono::steady_clock::now();
    const std::string line = stats_line(before, now, std::chrono::duration<double>(t - last).count());
    if (!line.empty()) fmt::print(stderr, "{}\n", line);
    before = now;
    last = t;
  }
}

}  // namespace tandem::cli
