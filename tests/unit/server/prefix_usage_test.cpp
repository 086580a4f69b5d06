// The prefix cache as the APIs show it: cached prompt tokens in every usage shape (OpenAI
// chat, completions and responses: prompt_tokens_details / input_tokens_details;
// Anthropic: cache_read_input_tokens, apart from input_tokens), streamed and not;
// `cache_salt` passed to the engine and checked; /stats and /metrics counters.
#include <gtest/gtest.h>

#include "test_server.h"

namespace tandem::server::testing {
namespace prefix_usage_test {

// The default script, but the final chunk reports `cached` prompt tokens (choice i: cached + i).
void script_cached(TestServer& s, int cached) {
  s.engine.script = [cached](int index, const GenerationRequest& r) {
    StreamChunk last = final_chunk(FinishReason::Stop, int(r.prompt.size()), 2);
    last.cached_tokens = cached + index;
    return std::vector<StreamChunk>{text_chunk("Hello", {72}), text_chunk(" world", {87}), last};
  };
}

Json usage_of_stream(const std::string& body) {
  Json usage;
  for (const SseEvent& e : parse_sse(body)) {
    if (e.data == "[DONE]") continue;
    Json j = Json::parse(e.data);
    if (j.contains("usage") && !j["usage"].is_null()) usage = j["usage"];
    if (j.contains("response") && j["response"].contains("usage") && !j["response"]["usage"].is_null())
      usage = j["response"]["usage"];
  }
  return usage;
}

TEST(PrefixUsage, ChatReportsCachedTokensOncePerPrompt) {
  TestServer s;
  script_cached(s, 16);
  Json j = s.post("/v1/chat/completions", chat_body("hi", {{"n", 3}})).json();
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 18);  // the best of 3 choices
  HttpReply r = s.post("/v1/chat/completions",
                       chat_body("hi", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(usage_of_stream(r.body)["prompt_tokens_details"]["cached_tokens"], 19);
}

TEST(PrefixUsage, CompletionsSumTheirPrompts) {
  TestServer s;
  script_cached(s, 32);
  Json body = {{"model", "test-model"}, {"prompt", {"one", "two"}}, {"n", 2}, {"max_tokens", 4}};
  HttpReply r = s.post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  // Choices 0, 1 share prompt 0 (32, 33), choices 2, 3 prompt 1 (34, 35).
  EXPECT_EQ(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 33 + 35);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  r = s.post("/v1/completions", body);
  EXPECT_EQ(usage_of_stream(r.body)["prompt_tokens_details"]["cached_tokens"], (36 + 37) + (38 + 39) - 36 - 38);
}

TEST(PrefixUsage, ResponsesReportInputTokensDetails) {
  TestServer s;
  script_cached(s, 48);
  Json body = {{"model", "test-model"}, {"input", "hi"}};
  HttpReply r = s.post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["input_tokens_details"]["cached_tokens"], 48);
  body["stream"] = true;
  r = s.post("/v1/responses", body);
  EXPECT_EQ(usage_of_stream(r.body)["input_tokens_details"]["cached_tokens"], 49);
}

TEST(PrefixUsage, AnthropicCountsCacheReadsApartFromInputTokens) {
  TestServer s;
  script_cached(s, 16);
  Json body = {{"model", "test-model"}, {"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  HttpReply r = s.post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const int prompt = int(s.engine.requests()[0].prompt.size());
  Json usage = r.json()["usage"];
  EXPECT_EQ(usage["cache_read_input_tokens"], 16);
  EXPECT_EQ(usage["input_tokens"], prompt - 16);
  EXPECT_EQ(usage["cache_creation_input_tokens"], 0);
  body["stream"] = true;
  r = s.post("/v1/messages", body);
  Json delta_usage;
  for (const SseEvent& e : parse_sse(r.body))
    if (e.event == "message_delta") delta_usage = Json::parse(e.data)["usage"];
  EXPECT_EQ(delta_usage["cache_read_input_tokens"], 17);
  EXPECT_EQ(delta_usage["input_tokens"], prompt - 17);
  EXPECT_EQ(delta_usage["output_tokens"], 2);
}

TEST(PrefixUsage, CacheSaltReachesTheEngineAndIsChecked) {
  TestServer s;
  ASSERT_EQ(s.post("/v1/chat/completions", chat_body("hi", {{"cache_salt", "tenant-7"}})).status, 200);
  Json msg = {{"model", "test-model"}, {"max_tokens", 8}, {"cache_salt", "tenant-8"},
              {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  ASSERT_EQ(s.post("/v1/messages", msg).status, 200);
  ASSERT_EQ(s.post("/v1/completions", Json{{"model", "test-model"}, {"prompt", "x"}, {"max_tokens", 2},
                                          {"cache_salt", "c"}}).status, 200);
  ASSERT_EQ(s.post("/v1/responses", Json{{"model", "test-model"}, {"input", "x"}, {"cache_salt", "r"}}).status, 200);
  std::vector<GenerationRequest> sent = s.engine.requests();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0].cache_salt, "tenant-7");
  EXPECT_EQ(sent[1].cache_salt, "tenant-8");
  EXPECT_EQ(sent[2].cache_salt, "c");
  EXPECT_EQ(sent[3].cache_salt, "r");
  for (Json bad : {Json(""), Json(5), Json(std::string(2000, 'x'))}) {
    HttpReply r = s.post("/v1/chat/completions", chat_body("hi", {{"cache_salt", bad}}));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.json()["error"]["param"], "cache_salt") << r.body;
    msg["cache_salt"] = bad;
    r = s.post("/v1/messages", msg);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.json()["type"], "error") << r.body;
  }
  EXPECT_EQ(s.engine.requests().size(), 4u);
}

TEST(PrefixUsage, StatsAndMetricsShowTheCache) {
  TestServer s;
  Json stats = s.get("/stats").json();
  EXPECT_EQ(stats["kv_blocks"]["cached"], 30);
  EXPECT_EQ(stats["kv_blocks"]["used"], 25);
  EXPECT_EQ(stats["kv_groups"][0]["cached"], 18);
  EXPECT_EQ(stats["kv_groups"][1]["cached"], 12);
  EXPECT_EQ(stats["prefix_cache"]["enabled"], true);
  EXPECT_EQ(stats["prefix_cache"]["queries_total"], 200);
  EXPECT_EQ(stats["prefix_cache"]["hits_total"], 150);
  EXPECT_DOUBLE_EQ(stats["prefix_cache"]["hit_rate"].get<double>(), 0.75);
  const std::string m = s.get("/metrics").body;
  EXPECT_NE(m.find("tandem:prefix_cache_queries_total{model_name=\"test-model\"} 200"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem:prefix_cache_hits_total{model_name=\"test-model\"} 150"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem:kv_blocks_cached{model_name=\"test-model\"} 30"), std::string::npos) << m;
}

}  // namespace prefix_usage_test
}  // namespace tandem::server::testing
