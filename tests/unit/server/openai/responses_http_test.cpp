// /v1/responses (OpenAI Responses API) through a real server over the FakeEngine: text
// output, the streamed events, function tools (calls parsed into function_call items,
// streamed as their own items), tool round trips in the input, forced calls, refusals.
#include <gtest/gtest.h>

#include "../test_server.h"

namespace tandem::server::testing {
namespace responses_http_test {

std::vector<std::string> event_names(const std::vector<SseEvent>& events) {
  std::vector<std::string> names;
  for (const SseEvent& e : events) {
    names.push_back(e.event);
    EXPECT_EQ(Json::parse(e.data)["type"], e.event);  // data names its event's type
  }
  return names;
}

const char* kToolCallText =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}])");
}

Json responses_body(Json extra) {
  Json body = {{"model", "test-model"}, {"input", "weather in Paris?"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

TEST(Responses, NonStreaming) {
  TestServer s;
  Json j = s.post("/v1/responses", Json{{"model", "test-model"},
                                        {"input", "hi"},
                                        {"instructions", "Be brief."},
                                        {"max_output_tokens", 8}})
               .json();
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hello world");
  EXPECT_EQ(j["instructions"], "Be brief.");
  EXPECT_EQ(j["usage"]["output_tokens"], 2);
  EXPECT_EQ(s.engine.requests()[0].max_tokens, 8);
  EXPECT_EQ(s.engine.requests()[0].prompt,
            Tokenizer::load(llama_dir())
                ->encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                         "<|im_start|>assistant\n",
                         false));
}

TEST(Responses, StreamingEvents) {
  TestServer s;
  HttpReply r = s.post(
      "/v1/responses",
      Json{{"input", {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}},
           {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<SseEvent> events = parse_sse(r.body);
  std::vector<std::string> names = event_names(events);
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names.front(), "response.created");
  EXPECT_EQ(names.back(), "response.completed");
  std::string text;
  int last_sequence = -1;
  for (const SseEvent& e : events) {
    Json d = Json::parse(e.data);
    EXPECT_EQ(d["sequence_number"], last_sequence + 1);
    last_sequence = d["sequence_number"];
    if (e.event == "response.output_text.delta") text += d["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello world");
  Json done = Json::parse(events.back().data)["response"];
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Hello world");
  EXPECT_EQ(done["status"], "completed");
}

TEST(Responses, ToolCallsBecomeFunctionCallItems) {
  TestServer s;
  s.engine.script = pieces_of(std::string("Checking. ") + kToolCallText, 1000);
  Json j = s.post("/v1/responses", responses_body({{"tools", weather_tools()}})).json();
  ASSERT_EQ(j["output"].size(), 2u) << j.dump();
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Checking.");
  const Json& call = j["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(Json::parse(call["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  EXPECT_EQ(j["tools"], weather_tools());
  EXPECT_EQ(j["tool_choice"], "auto");
  // Only a call: no message item.
  s.engine.script = pieces_of(kToolCallText, 1000);
  Json only = s.post("/v1/responses", responses_body({{"tools", weather_tools()}})).json();
  ASSERT_EQ(only["output"].size(), 1u);
  EXPECT_EQ(only["output"][0]["type"], "function_call");
  // tool_choice "none": the same text is a message.
  Json none = s.post("/v1/responses", responses_body({{"tools", weather_tools()}, {"tool_choice", "none"}}))
                  .json();
  ASSERT_EQ(none["output"].size(), 1u);
  EXPECT_EQ(none["output"][0]["content"][0]["text"], kToolCallText);
}

TEST(Responses, ToolCallsStreamAsTheirOwnItems) {
  TestServer s;
  s.engine.script = pieces_of(std::string("I'll check.") + kToolCallText, 3);
  HttpReply r = s.post("/v1/responses", responses_body({{"tools", weather_tools()}, {"stream", true}}));
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<SseEvent> events = parse_sse(r.body);
  std::vector<std::string> names = event_names(events);
  std::string text, args, call_id;
  int last_sequence = -1;
  for (const SseEvent& e : events) {
    Json d = Json::parse(e.data);
    EXPECT_EQ(d["sequence_number"], last_sequence + 1);
    last_sequence = d["sequence_number"];
    if (e.event == "response.output_text.delta") {
      EXPECT_EQ(d["output_index"], 0);
      text += d["delta"].get<std::string>();
    }
    if (e.event == "response.output_item.added" && d["item"]["type"] == "function_call") {
      EXPECT_EQ(d["output_index"], 1);
      EXPECT_EQ(d["item"]["name"], "get_weather");
      call_id = d["item"]["id"];
    }
    if (e.event == "response.function_call_arguments.delta") {
      EXPECT_EQ(d["item_id"], call_id);
      args += d["delta"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "I'll check.");
  EXPECT_EQ(Json::parse(args), Json({{"city", "Paris"}}));
  EXPECT_EQ(std::count(names.begin(), names.end(), "response.output_item.done"), 2);
  Json done = Json::parse(events.back().data)["response"];
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "I'll check.");
  EXPECT_EQ(done["output"][1]["id"], call_id);
  EXPECT_EQ(done["output"][1]["arguments"], args);
}

// A tool round trip given as Responses items renders as the same conversation through
// chat completions: the same prompt tokens, tools included.
TEST(Responses, ToolRoundTripInTheInputIsTheChatConversation) {
  TestServer s;
  Json input = Json::parse(R"([
      {"role": "user", "content": "weather in Paris?"},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
      {"type": "function_call_output", "call_id": "call_2", "output": "rain, 12 C"}])");
  HttpReply r = s.post("/v1/responses", responses_body({{"input", input}, {"tools", weather_tools()}}));
  ASSERT_EQ(r.status, 200) << r.body;
  Json messages = Json::parse(R"([
      {"role": "user", "content": "weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
      {"role": "tool", "tool_call_id": "call_2", "content": "rain, 12 C"}])");
  Json chat_tools = Json::array();
  for (const Json& t : weather_tools())
    chat_tools.push_back({{"type", "function"},
                          {"function", {{"name", t["name"]}, {"description", t["description"]},
                                        {"parameters", t["parameters"]}}}});
  ASSERT_EQ(s.post("/v1/chat/completions",
                   Json{{"model", "test-model"}, {"messages", messages}, {"tools", chat_tools}})
                .status,
            200);
  ASSERT_EQ(s.engine.requests().size(), 2u);
  EXPECT_EQ(s.engine.requests()[0].prompt, s.engine.requests()[1].prompt);
  std::string prompt = Tokenizer::load(llama_dir())->decode(s.engine.requests()[0].prompt, false);
  EXPECT_NE(prompt.find("sunny, 21 C"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("rain, 12 C"), std::string::npos) << prompt;
}

TEST(Responses, ForcedToolCallsAttachAGrammar) {
  TestServer s;
  ASSERT_EQ(s.post("/v1/responses", responses_body({{"tools", weather_tools()}, {"tool_choice", "required"}})).status,
            200);
  EXPECT_TRUE(s.engine.requests().back().grammar != nullptr);
  ASSERT_EQ(s.post("/v1/responses", responses_body({{"tools", weather_tools()},
                                                     {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}}))
                .status,
            200);
  EXPECT_TRUE(s.engine.requests().back().grammar != nullptr);
  ASSERT_EQ(s.post("/v1/responses", responses_body({{"tools", weather_tools()}})).status, 200);
  EXPECT_TRUE(s.engine.requests().back().grammar == nullptr);
}

TEST(Responses, BadToolFieldsAre400sNamingTheField) {
  TestServer s;
  const std::pair<Json, std::string> cases[] = {
      {{{"tools", {{{"type", "web_search"}}}}}, "tools[0].type"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].name"},
      {{{"tools", weather_tools()}, {"tool_choice", {{"type", "function"}, {"name", "nope"}}}}, "tool_choice"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"tools", weather_tools()}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"input", {{{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}}}}, "input[0].call_id"},
      {{{"input", {{{"type", "reasoning"}}}}}, "input[0].type"},
  };
  for (const auto& [extra, param] : cases) {
    HttpReply r = s.post("/v1/responses", responses_body(extra));
    EXPECT_EQ(r.status, 400) << extra.dump() << " " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], param) << r.body;
  }
  EXPECT_EQ(s.post("/v1/responses", responses_body({})).status, 200);  // still serving
}

}  // namespace responses_http_test
}  // namespace tandem::server::testing
