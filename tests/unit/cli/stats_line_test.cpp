// The running log line of `tandem serve`: rates over the interval, the KV blocks, and the
// prefix cache's hit rate over the interval and since start; nothing when idle.
#include "cli/stats_log.h"

#include <gtest/gtest.h>

namespace tandem::cli {
namespace stats_line_test {

TEST(StatsLine, ReportsTheIntervalAndTheHitRate) {
  EngineStats before, now;
  before.prompt_tokens_total = 100;
  before.prefix_cache_queries_total = 100;
  before.prefix_cache_hits_total = 0;
  now = before;
  now.prefix_cache_enabled = true;
  now.num_running = 2;
  now.num_waiting = 1;
  now.prompt_tokens_total = 300;
  now.generation_tokens_total = 50;
  now.kv_blocks_total = 200;
  now.kv_blocks_used = 50;
  now.kv_blocks_cached = 40;
  now.prefix_cache_queries_total = 500;
  now.prefix_cache_hits_total = 300;
  EXPECT_EQ(stats_line(before, now, 10.0),
            "tandem: running 2, waiting 1 | prompt 20.0 tok/s, generation 5.0 tok/s | "
            "KV blocks used 50/200 (25.0%), cached 40 | prefix cache hit rate 75.0% "
            "(60.0% since start)");
  now.prefix_cache_enabled = false;
  EXPECT_NE(stats_line(before, now, 10.0).find("| prefix cache off"), std::string::npos);
}

TEST(StatsLine, SaysNothingWhenIdle) {
  EngineStats idle;
  idle.prompt_tokens_total = 10;
  idle.kv_blocks_cached = 7;
  EXPECT_EQ(stats_line(idle, idle, 10.0), "");
  EngineStats finished = idle;
  finished.requests_finished = 1;
  EXPECT_NE(stats_line(idle, finished, 10.0), "");
}

}  // namespace stats_line_test
}  // namespace tandem::cli
