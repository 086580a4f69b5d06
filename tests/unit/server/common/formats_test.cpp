// Logprobs shapes, metrics text and the SSE framing helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "server/common/logprobs_format.h"
#include "server/common/server_metrics.h"
#include "server/common/sse.h"

namespace tandem::server {
namespace formats_test {

std::string fake_text(int32_t id) {
  return id == 9 ? std::string("\xe2\x82") : "t" + std::to_string(id);
}

std::vector<GeneratedToken> two_tokens() {
  return {GeneratedToken{1, -0.25f, {{1, -0.25f}, {2, -1.5f}, {3, -3.f}}},
          GeneratedToken{9, -INFINITY, {{9, -INFINITY}}}};
}

TEST(Logprobs, ChatShape) {
  Json content = chat_logprobs_content(two_tokens(), 2, fake_text);
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "t1");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(content[0]["bytes"], Json({116, 49}));   // "t1"
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);  // top 2 of 3
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "t2");
  EXPECT_FLOAT_EQ(content[0]["top_logprobs"][1]["logprob"].get<float>(), -1.5f);
  // Half a UTF-8 character: exact bytes, and -inf clamped to a JSON number.
  EXPECT_EQ(content[1]["bytes"], Json({0xe2, 0x82}));
  EXPECT_FLOAT_EQ(content[1]["logprob"].get<float>(), -9999.f);
  EXPECT_NO_THROW(dump_json(content));
}

TEST(Logprobs, CompletionShapeAndOffsets) {
  size_t offset = 5;
  Json lp = completion_logprobs(two_tokens(), 1, fake_text, offset);
  EXPECT_EQ(lp["tokens"], Json({"t1", "\xe2\x82"}));
  EXPECT_EQ(lp["text_offset"], Json({5, 7}));
  EXPECT_EQ(offset, 9u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
  EXPECT_FLOAT_EQ(lp["top_logprobs"][0]["t1"].get<float>(), -0.25f);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][0].get<float>(), -0.25f);
  std::string text = dump_json(lp);  // invalid UTF-8 is replaced, not thrown
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos);
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // on the bound: counts as <= 0.1
  h.observe(0.5);
  h.observe(7);
  Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.sum, 7.65);
}

TEST(Metrics, RateOverTheWindow) {
  RateMeter m(std::chrono::seconds(60));
  auto t0 = Clock::now();
  m.add(100, t0);
  m.add(20, t0 + std::chrono::seconds(30));
  // 120 tokens over a meter at most 60 s old, measured at t0 + 30 s: 120 / 30.
  EXPECT_NEAR(m.per_second(t0 + std::chrono::seconds(30)), 4.0, 0.2);
  // At t0 + 85 s the first 100 have left the 60 s window: 20 / 60.
  EXPECT_NEAR(m.per_second(t0 + std::chrono::seconds(85)), 20.0 / 60.0, 0.05);
}

TEST(Metrics, PrometheusNames) {
  ServerMetrics m;
  m.observe_time_to_first_token(0.02);
  m.observe_inter_token_latency(0.01);
  m.observe_e2e_latency(1.2);
  m.observe_queue_time(0.0);
  m.count_finished(FinishReason::Length);
  EngineStats s;
  s.num_running = 3;
  s.num_waiting = 2;
  s.kv_blocks_total = 10;
  s.kv_blocks_used = 4;
  s.prompt_tokens_total = 11;
  s.generation_tokens_total = 22;
  std::string text = m.prometheus(s, "m\"x");
  for (const char* line :
       {"tandem:num_requests_running{model_name=\"m\\\"x\"} 3\n",
        "tandem:num_requests_waiting{model_name=\"m\\\"x\"} 2\n",
        "tandem:kv_cache_usage_perc{model_name=\"m\\\"x\"} 0.4\n",
        "tandem:prompt_tokens_total{model_name=\"m\\\"x\"} 11\n",
        "tandem:generation_tokens_total{model_name=\"m\\\"x\"} 22\n",
        "# TYPE tandem:time_to_first_token_seconds histogram\n",
        "tandem:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"0.02\"} 1\n",
        "tandem:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"0.01\"} 0\n",
        "tandem:inter_token_latency_seconds_count{model_name=\"m\\\"x\"} 1\n",
        "tandem:e2e_request_latency_seconds_bucket{model_name=\"m\\\"x\",le=\"+Inf\"} 1\n",
        "tandem:request_queue_time_seconds_count{model_name=\"m\\\"x\"} 1\n",
        "tandem:request_success_total{model_name=\"m\\\"x\",finished_reason=\"length\"} 1\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_data(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("ping", Json{{"type", "ping"}}),
            "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

}  // namespace formats_test
}  // namespace tandem::server
