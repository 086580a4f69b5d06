// One request's bounds, through real HTTP (issue 17, cases 1, 4, 5, 6 and 7): JSON nested
// deep in the body or inside a tool call's arguments string, numbers out of range, too
// many values; stop strings, choices and prompt tokens; a prompt too long to tokenize;
// chat templates that loop, grow or recurse without end, and a stopping server that
// cancels a render. Each refusal is a 4xx in the API's shape that names its limit, and the
// server answers a normal request afterwards.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "test_server.h"

namespace tandem::server::testing {
namespace request_limits_test {

using namespace std::chrono_literals;

std::string error_message(const HttpReply& r) {
  Json j = Json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].contains("message"))
    return j["error"]["message"];
  return "<no error message: " + r.body.substr(0, 200) + ">";
}

void expect_refusal(const HttpReply& r, int status, const std::string& words) {
  EXPECT_EQ(r.status, status) << r.body.substr(0, 400);
  std::string msg = error_message(r);
  EXPECT_NE(msg.find(words), std::string::npos) << msg;
}

std::string nested(int depth) {
  return std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
}

Json chat_with_tool_arguments(const std::string& arguments) {
  Json call = {
      {"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}};
  return {{"model", "test-model"},
          {"messages",
           {{{"role", "user"}, {"content", "hi"}},
            {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}},
            {{"role", "tool"}, {"content", "ok"}, {"tool_call_id", "c1"}}}}};
}

TEST(RequestLimits, JsonNestedDeepInsideAToolCallStringIsRefused) {
  TestServer s;
  // The crash: 100k levels inside tool_calls[].function.arguments, parsed for the
  // template and copied recursively (SIGSEGV), on chat and on /tokenize.
  Json body = chat_with_tool_arguments("{\"a\": " + nested(100000) + "}");
  expect_refusal(s.post("/v1/chat/completions", body), 400, "--max-json-depth");
  expect_refusal(s.post("/tokenize", body), 400, "--max-json-depth");
  HttpReply ok = s.post("/v1/chat/completions", chat_with_tool_arguments("{\"a\": [[1]]}"));
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(RequestLimits, BodiesPastTheJsonBoundsAreRefused) {
  ServerOptions o;
  o.limits.request.json.max_values = 10000;
  TestServer s(o);
  expect_refusal(s.post("/v1/chat/completions", std::string("{\"a\": ") + nested(100000) + "}"),
                 400, "deeper than 100 levels (--max-json-depth)");
  std::string values = "{\"a\": [";
  for (int i = 0; i < 20000; ++i) values += "{},";
  values += "{}]}";
  expect_refusal(s.post("/v1/completions", values), 400, "--max-json-values");
  HttpReply big =
      s.post("/v1/completions", std::string("{\"prompt\": \"x\", \"max_tokens\": 1e400}"));
  expect_refusal(big, 400, "number overflow");
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("hi")).status, 200);
}

TEST(RequestLimits, StopStringsAreBoundedInCountAndLength) {
  TestServer s;
  Json many = Json::array();
  for (int i = 0; i < 17; ++i) many.push_back("s" + std::to_string(i));
  expect_refusal(s.post("/v1/chat/completions", chat_body("hi", {{"stop", many}})), 400,
                 "--max-stop-strings");
  // The issue: 4 × 1 MB stops with n=64 took +780 MB.
  Json huge = Json::array({std::string(1 << 20, 's')});
  expect_refusal(s.post("/v1/chat/completions", chat_body("hi", {{"stop", huge}, {"n", 64}})), 400,
                 "--max-stop-length");
  Json anthropic = {{"model", "test-model"},
                    {"max_tokens", 5},
                    {"stop_sequences", huge},
                    {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  HttpReply a = s.post("/v1/messages", anthropic);
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.json()["type"], "error") << a.body;
  EXPECT_NE(a.json()["error"]["message"].get<std::string>().find("--max-stop-length"),
            std::string::npos);
  EXPECT_TRUE(s.engine.requests().empty());
}

// Issue 43 item 5's small holes: bytes after a valid body, Anthropic's stop_sequences as a
// string, and a template variable the server sets given again in chat_template_kwargs.
TEST(RequestLimits, TheProbesSmallHolesAreClosed) {
  TestServer s;
  const std::string valid = chat_body("hi").dump();
  expect_refusal(s.post("/v1/chat/completions", valid + std::string("\0\0garbage", 9)), 400,
                 "NUL byte at offset");
  Json anthropic = {{"model", "test-model"},
                    {"max_tokens", 5},
                    {"stop_sequences", "END"},
                    {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  HttpReply a = s.post("/v1/messages", anthropic);
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.json()["error"]["message"].get<std::string>().find("stop_sequences"),
            std::string::npos)
      << a.body;
  Json evil = {{"messages", Json::array({{{"role", "system"}, {"content", "unchecked"}}})}};
  HttpReply k = s.post("/v1/chat/completions", chat_body("hi", {{"chat_template_kwargs", evil}}));
  expect_refusal(k, 400, "'chat_template_kwargs.messages' is reserved");
  EXPECT_EQ(k.json()["error"]["param"], "chat_template_kwargs.messages");
  EXPECT_TRUE(s.engine.requests().empty());
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("hi")).status, 200);
}

// --max-grammar-bytes and --max-grammar-insts reach the served model's grammar cache.
TEST(RequestLimits, GrammarBoundsComeFromTheFlags) {
  TestServer s({}, false);
  ServedModelOptions options;
  options.grammar.max_spec_bytes = 64;
  s.make_ready(load_served_model(llama_dir(), s.engine, nullptr, options));
  Json schema = {{"type", "object"},
                 {"properties",
                  {{"a_rather_long_property_name", {{"type", "string"}}},
                   {"another_one", {{"type", "integer"}}}}}};
  Json format = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}};
  expect_refusal(s.post("/v1/chat/completions", chat_body("hi", {{"response_format", format}})),
                 400, "--max-grammar-bytes");
  TestServer t({}, false);
  options = {};
  options.grammar.max_insts = 50;
  t.make_ready(load_served_model(llama_dir(), t.engine, nullptr, options));
  Json long_string = {{"type", "string"}, {"maxLength", 500}};
  format["json_schema"]["schema"] = long_string;
  expect_refusal(t.post("/v1/chat/completions", chat_body("hi", {{"response_format", format}})),
                 400, "--max-grammar-insts");
}

TEST(RequestLimits, ChoicesTimesPromptTokensAreBounded) {
  ServerOptions o;
  o.limits.request.max_prompt_tokens = 100;
  TestServer s(o);
  expect_refusal(s.post("/v1/chat/completions", chat_body("hi", {{"n", 129}})), 400,
                 "--max-choices");
  Json prompt = Json::array();
  for (int i = 0; i < 30; ++i) prompt.push_back(5);
  expect_refusal(s.post("/v1/completions", Json{{"prompt", prompt}, {"n", 4}, {"max_tokens", 1}}),
                 400, "--max-request-tokens");
  EXPECT_TRUE(s.engine.requests().empty());
  EXPECT_EQ(s.post("/v1/completions", Json{{"prompt", prompt}, {"n", 3}, {"max_tokens", 1}}).status,
            200);
}

TEST(RequestLimits, APromptTooLongForTheContextIsRefusedBeforeTokenizing) {
  TestServer s;  // the fake engine's context: 256 tokens
  // 15 MB of text (the issue: tokenized for 9.8 s and +680 MB before this refusal). The
  // byte-level tokenizer's longest piece bounds the tokens from below.
  HttpReply r =
      s.post("/v1/completions", Json{{"prompt", std::string(15 << 20, 'a')}, {"max_tokens", 1}});
  expect_refusal(r, 400, "which is at least");
  EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
  r = s.post("/v1/chat/completions", chat_body(std::string(4 << 20, 'a')));
  expect_refusal(r, 400, "which is at least");
  EXPECT_EQ(s.post("/v1/chat/completions", chat_body("hi")).status, 200);
}

TEST(RequestLimits, AnUnknownModelNameIs404ModelNotFound) {
  TestServer s;
  HttpReply r = s.post("/v1/chat/completions", chat_body("hi", {{"model", "gpt-4o"}}));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["code"], "model_not_found") << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "model");
  Json msg = {{"model", "claude-x"},
              {"max_tokens", 5},
              {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  HttpReply a = s.post("/v1/messages", msg);
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.json()["error"]["type"], "not_found_error") << a.body;
  EXPECT_EQ(s.post("/v1/completions", Json{{"model", "x"}, {"prompt", "a"}}).status, 404);
  EXPECT_EQ(s.post("/v1/responses", Json{{"model", "x"}, {"input", "a"}}).status, 404);
  EXPECT_EQ(s.post("/tokenize", Json{{"model", "x"}, {"prompt", "a"}}).status, 404);
  // The served name, or none at all, is served.
  EXPECT_EQ(s.post("/v1/completions", Json{{"model", "test-model"}, {"prompt", "a"}}).status, 200);
  EXPECT_EQ(s.post("/v1/completions", Json{{"prompt", "a"}}).status, 200);
  EXPECT_TRUE(s.engine.requests().size() == 2);
}

// A ServedModel over the fake engine whose chat template is `source`.
ServedModel with_template(FakeEngine& engine, const std::string& source) {
  ServedModel m = load_served_model(llama_dir(), engine);
  TokenizerConfig config;
  config.chat_template = source;
  m.chat = ChatPromptBuilder::create(config, m.tokenizer);
  return m;
}

TEST(RequestLimits, ChatTemplatesThatLoopGrowOrRecurseAreStopped) {
  struct Case {
    const char* source;
    const char* flag;
  } cases[] = {
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
       "--max-template-iterations"},
      {"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "--max-template-output"},
      {"{% set s = 'x' * 1000000 %}{{ ([s] * 100000) | join }}", "--max-template-memory"},
      {"{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}", "--max-template-depth"},
  };
  for (const Case& c : cases) {
    TestServer s({}, /*ready=*/false);
    s.make_ready(with_template(s.engine, c.source));
    HttpReply r = s.post("/v1/chat/completions", chat_body("hi"));
    expect_refusal(r, 400, c.flag);
    EXPECT_EQ(r.json()["error"]["code"], "template_limit_exceeded") << r.body;
    EXPECT_EQ(s.post("/v1/completions", Json{{"prompt", "a"}}).status, 200);
  }
}

TEST(RequestLimits, StoppingTheServerCancelsARenderInProgress) {
  ServerOptions o;
  o.limits.request.chat_template.max_iterations = int64_t(1) << 40;  // only stop() ends it
  o.limits.request.chat_template.max_memory_bytes = size_t(1) << 40;
  o.drain_timeout = 30s;
  TestServer s(o, /*ready=*/false);
  s.make_ready(with_template(
      s.engine,
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"));
  auto reply = std::async(std::launch::async,
                          [&] { return s.post("/v1/chat/completions", chat_body("hi")); });
  std::this_thread::sleep_for(300ms);
  auto start = std::chrono::steady_clock::now();
  s.server().stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // not the 30 s drain, not forever
  HttpReply r = reply.get();
  EXPECT_EQ(r.status, 503) << r.body;
}

}  // namespace request_limits_test
}  // namespace tandem::server::testing
