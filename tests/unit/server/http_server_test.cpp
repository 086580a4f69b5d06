// The server's edges: readiness, auth, body limits, unknown routes, every validation
// error through real HTTP in each API's shape, and that it keeps serving after them.
#include <gtest/gtest.h>

#include "test_server.h"

namespace tandem::server::testing {
namespace http_server_test {

void expect_openai_error(const HttpReply& r, int status, const std::string& param = "*") {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
  if (param.empty()) {
    EXPECT_TRUE(e["param"].is_null()) << r.body;
  } else if (param != "*") {
    EXPECT_EQ(e["param"], param) << r.body;
  }
}

void expect_anthropic_error(const HttpReply& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
}

TEST(HttpServer, HealthIs503UntilReady) {
  TestServer s({}, /*ready=*/false);
  EXPECT_EQ(s.get("/health").status, 503);
  expect_openai_error(s.post("/v1/chat/completions", chat_body("hi")), 503);
  s.make_ready();
  HttpReply h = s.get("/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json()["status"], "ok");
}

TEST(HttpServer, ApiKeyIsChecked) {
  ServerOptions o;
  o.api_key = "sekrit";
  TestServer s(o);
  expect_openai_error(s.post("/v1/chat/completions", chat_body("hi")), 401);
  expect_openai_error(
      s.post("/v1/chat/completions", chat_body("hi"), {{"Authorization", "Bearer nope"}}), 401);
  expect_anthropic_error(s.post("/v1/messages", Json::object(), {{"x-api-key", "sekri"}}), 401,
                         "authentication_error");
  EXPECT_EQ(
      s.post("/v1/chat/completions", chat_body("hi"), {{"Authorization", "Bearer sekrit"}}).status,
      200);
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("hi"), {{"x-api-key", "sekrit"}}).status, 200);
  EXPECT_EQ(s.get("/health").status, 200);  // probes need no key
}

TEST(HttpServer, BodyTooLargeIs413) {
  ServerOptions o;
  o.limits.http.max_body_bytes = 2048;
  TestServer s(o);
  expect_openai_error(s.post("/v1/chat/completions", chat_body(std::string(4096, 'a'))), 413);
  expect_anthropic_error(s.post("/v1/messages", chat_body(std::string(4096, 'a'))), 413,
                         "request_too_large");
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("small")).status, 200);
}

TEST(HttpServer, UnknownRoutesAre404Json) {
  TestServer s;
  expect_openai_error(s.post("/v1/nope", Json::object()), 404);
  expect_openai_error(s.get("/v1/chat/completions"), 404);
  expect_anthropic_error(s.post("/v1/messages/nope", Json::object()), 404, "not_found_error");
  expect_openai_error(s.get("/v1/models/other-model"), 404);
}

struct BadRequest {
  const char* path;
  std::string body;  // raw text, so malformed JSON can be sent
  const char* param;
};

std::string with(Json body) {
  return body.dump();
}

TEST(HttpServer, EveryValidationErrorIsA400InTheApisShape) {
  TestServer s;
  s.engine.info().max_model_len = 64;
  std::string long_text(400, 'x');  // far more than 64 tokens in a 512-token byte-level BPE
  const std::vector<BadRequest> cases = {
      {"/v1/chat/completions", "{\"messages\": [", ""},
      {"/v1/chat/completions", "[1, 2]", ""},
      {"/v1/chat/completions", with({{"model", "test-model"}}), "messages"},
      {"/v1/chat/completions", with(chat_body("hi", {{"messages", Json::array()}})), "messages"},
      {"/v1/chat/completions", with({{"messages", "hi"}}), "messages"},
      {"/v1/chat/completions", with({{"messages", {{{"role", "robot"}, {"content", "x"}}}}}),
       "messages[0].role"},
      {"/v1/chat/completions", with(chat_body("hi", {{"temperature", "hot"}})), "temperature"},
      {"/v1/chat/completions", with(chat_body("hi", {{"temperature", 3}})), "temperature"},
      {"/v1/chat/completions", with(chat_body("hi", {{"top_p", 0}})), "top_p"},
      {"/v1/chat/completions", with(chat_body("hi", {{"max_tokens", 0}})), "max_tokens"},
      {"/v1/chat/completions", with(chat_body("hi", {{"max_tokens", -5}})), "max_tokens"},
      {"/v1/chat/completions", with(chat_body("hi", {{"max_tokens", 60}})), "max_tokens"},
      {"/v1/chat/completions", with(chat_body(long_text)), "messages"},
      {"/v1/chat/completions", with(chat_body("hi", {{"n", 0}})), "n"},
      {"/v1/chat/completions", with(chat_body("hi", {{"n", 1000}})), "n"},
      {"/v1/chat/completions", with(chat_body("hi", {{"stream", "yes"}})), "stream"},
      {"/v1/chat/completions", with(chat_body("hi", {{"stop", 5}})), "stop"},
      {"/v1/chat/completions", with(chat_body("hi", {{"top_logprobs", 3}})), "top_logprobs"},
      {"/v1/chat/completions", with(chat_body("hi", {{"logprobs", true}, {"top_logprobs", 50}})),
       "top_logprobs"},
      {"/v1/chat/completions",
       with(chat_body("hi", {{"response_format", {{"type", "json_schema"}}}})),
       "response_format.json_schema"},
      {"/v1/chat/completions",
       with(chat_body("hi", {{"response_format",
                              {{"type", "json_schema"},
                               {"json_schema",
                                {{"name", "x"},
                                 {"schema", {{"properties", {{"a", {{"type", "bogus"}}}}}}}}}}}})),
       "response_format"},
      {"/v1/chat/completions", with(chat_body("hi", {{"tool_choice", "required"}})), "tool_choice"},
      {"/v1/completions",
       with({{"prompt", "x"}, {"structured_outputs", {{"regex", "("}}}}), "structured_outputs.regex"},
      {"/v1/completions",
       with({{"prompt", "x"}, {"json_schema", {{"type", "object"}}}, {"grammar", "root ::= \"a\""}}),
       "grammar"},
      {"/v1/chat/completions",
       with(chat_body("hi", {{"stream_options", {{"include_usage", true}}}})), "stream_options"},
      {"/v1/chat/completions", with(chat_body("hi", {{"tools", {{{"type", "function"}}}}})),
       "tools[0].function"},
      {"/v1/completions", with({{"prompt", {1, 2, 512}}}), "prompt"},
      {"/v1/completions", with({{"prompt", {1, -1}}}), "prompt"},
      {"/v1/completions", with({{"prompt", Json::array()}}), "prompt"},
      {"/v1/completions", with({{"prompt", {"a", 1}}}), "prompt"},
      {"/v1/completions", with({{"prompt", 42}}), "prompt"},
      {"/v1/completions", with({{"prompt", ""}}), "prompt"},
      {"/v1/completions", with({{"max_tokens", 5}}), "prompt"},
      {"/v1/completions", with({{"prompt", long_text}}), "prompt"},
      {"/v1/completions", with({{"prompt", {1, 2}}, {"max_tokens", 63}}), "max_tokens"},
      {"/v1/completions",
       with({{"prompt", "a"}, {"echo", true}, {"logprobs", 2}, {"stream", true}}), "stream"},
      {"/v1/completions", with({{"prompt", "a"}, {"max_tokens", 0}}), "max_tokens"},
      {"/v1/completions", with({{"prompt", "a"}, {"echo", true}, {"max_tokens", -1}}), "max_tokens"},
      {"/v1/responses", with({{"model", "test-model"}}), "input"},
      {"/v1/responses", with({{"input", "hi"}, {"tools", {{{"type", "web_search"}}}}}), "tools[0].type"},
      {"/v1/responses", with({{"input", "hi"}, {"max_output_tokens", 0}}), "max_output_tokens"},
      {"/tokenize", with({{"nothing", 1}}), "prompt"},
      {"/detokenize", with({{"tokens", {1, 9999}}}), "tokens"},
  };
  for (const BadRequest& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + c.body.substr(0, 120));
    expect_openai_error(s.post(c.path, c.body), 400, c.param);
  }
  const std::vector<std::string> anthropic_cases = {
      "{not json",
      with({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}),  // no max_tokens
      with({{"max_tokens", 10}}),
      with({{"max_tokens", 10}, {"messages", Json::array()}}),
      with({{"max_tokens", 0}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}),
      with({{"max_tokens", 10},
            {"temperature", 1.5},
            {"messages", {{{"role", "user"}, {"content", "hi"}}}}}),
      with({{"max_tokens", 10}, {"messages", {{{"role", "system"}, {"content", "hi"}}}}}),
      with({{"max_tokens", 10}, {"messages", {{{"role", "user"}, {"content", long_text}}}}}),
      with({{"max_tokens", 10},
            {"stop_sequences", {1}},
            {"messages", {{{"role", "user"}, {"content", "hi"}}}}}),
  };
  for (const std::string& body : anthropic_cases) {
    SCOPED_TRACE(body.substr(0, 120));
    expect_anthropic_error(s.post("/v1/messages", body), 400, "invalid_request_error");
  }
  EXPECT_TRUE(s.engine.requests().empty());  // nothing invalid reached the engine
  EXPECT_EQ(s.get("/health").status, 200);
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("hi")).status, 200);
}

TEST(HttpServer, TemplateThatRaisesIsA400WithItsMessage) {
  TestServer s({}, false);
  ServedModel m = load_served_model(llama_dir(), s.engine);
  nlohmann::json config = {{"chat_template",
                            "{% for m in messages %}{% if m.role == 'system' %}"
                            "{{ raise_exception('This model does not take system prompts') }}"
                            "{% endif %}{{ m.content }}{% endfor %}"}};
  m.chat = ChatPromptBuilder::create(TokenizerConfig::parse(config, "test"), m.tokenizer);
  s.make_ready(std::move(m));
  Json body = {
      {"messages", {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}}};
  HttpReply r = s.post("/v1/chat/completions", body);
  expect_openai_error(r, 400);
  EXPECT_NE(r.body.find("This model does not take system prompts"), std::string::npos) << r.body;
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("fine")).status, 200);
}

TEST(HttpServer, EngineRefusalIsA400) {
  TestServer s;
  s.engine.script = [](int, const GenerationRequest&) {
    return std::vector<StreamChunk>{error_chunk("prompt can never fit in the KV cache")};
  };
  HttpReply r = s.post("/v1/chat/completions", chat_body("hi"));
  expect_openai_error(r, 400);
  EXPECT_NE(r.body.find("never fit"), std::string::npos);
  expect_openai_error(s.post("/v1/chat/completions", chat_body("hi", {{"stream", true}})), 400);
  expect_anthropic_error(
      s.post("/v1/messages",
             Json{{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}),
      400, "invalid_request_error");
}

TEST(HttpServer, ModelsStatsAndMetrics) {
  TestServer s;
  Json models = s.get("/v1/models").json();
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "test-model");
  EXPECT_EQ(s.get("/v1/models/test-model").json()["id"], "test-model");
  ASSERT_EQ(s.post("/v1/chat/completions", chat_body("hi")).status, 200);
  Json stats = s.get("/stats").json();
  EXPECT_EQ(stats["model"], "test-model");
  EXPECT_EQ(stats["kv_blocks"]["free"], 75);
  EXPECT_DOUBLE_EQ(stats["kv_cache_usage"].get<double>(), 0.25);
  EXPECT_TRUE(stats.contains("tokens_per_second_1m"));
  EXPECT_TRUE(stats.contains("uptime_s"));
  ASSERT_EQ(stats["kv_groups"].size(), 2u);
  EXPECT_EQ(stats["kv_groups"][1]["window"], 512);
  EXPECT_EQ(stats["kv_groups"][1]["free"], 35);
  EXPECT_EQ(stats["kv_groups"][0]["used"], 20);
  // One request, two tokens in two chunks: one TTFT and one gap in the last minute.
  const Json& latency = stats["latency_1m"];
  EXPECT_EQ(latency["ttft_s"]["count"], 1);
  EXPECT_EQ(latency["itl_s"]["count"], 1);
  EXPECT_TRUE(latency["ttft_s"]["p50"].is_number()) << latency;
  EXPECT_LE(latency["ttft_s"]["p50"].get<double>(), latency["e2e_s"]["p99"].get<double>() * 1.03);
  HttpReply metrics = s.get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(
      metrics.body.find("tandem:time_to_first_token_seconds_count{model_name=\"test-model\"} 1"),
      std::string::npos)
      << metrics.body;
  EXPECT_NE(
      metrics.body.find("tandem:e2e_request_latency_seconds_count{model_name=\"test-model\"} 1"),
      std::string::npos);
  // Two tokens in two chunks: one inter-token gap.
  EXPECT_NE(
      metrics.body.find("tandem:inter_token_latency_seconds_count{model_name=\"test-model\"} 1"),
      std::string::npos);
  EXPECT_NE(metrics.body.find("tandem:kv_cache_usage_perc{model_name=\"test-model\"} 0.25"),
            std::string::npos);
}

TEST(HttpServer, TokenizeAndDetokenize) {
  TestServer s;
  Json t = s.post("/tokenize", Json{{"prompt", "hello world"}}).json();
  auto tok = Tokenizer::load(llama_dir());
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), tok->encode("hello world", true));
  EXPECT_EQ(t["count"], t["tokens"].size());
  Json d = s.post("/detokenize", Json{{"tokens", t["tokens"]}}).json();
  EXPECT_EQ(d["prompt"], "hello world");
  Json chat =
      s.post("/tokenize", Json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}).json();
  EXPECT_EQ(chat["tokens"].get<std::vector<int32_t>>(),
            tok->encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false));
}

}  // namespace http_server_test
}  // namespace tandem::server::testing
