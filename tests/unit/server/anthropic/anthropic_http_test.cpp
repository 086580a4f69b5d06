// /v1/messages (Anthropic) through a real server over the FakeEngine.
#include <gtest/gtest.h>

#include "../test_server.h"

namespace tandem::server::testing {
namespace anthropic_http_test {

Json messages_body(const std::string& text, Json extra = Json::object()) {
  Json body = {{"model", "test-model"},
               {"max_tokens", 32},
               {"messages", {{{"role", "user"}, {"content", text}}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

std::vector<std::string> event_names(const std::vector<SseEvent>& events) {
  std::vector<std::string> names;
  for (const SseEvent& e : events) {
    names.push_back(e.event);
    // Every event's data names the same type as its event line.
    EXPECT_EQ(Json::parse(e.data)["type"], e.event);
  }
  return names;
}

TEST(Messages, NonStreaming) {
  TestServer s;
  Json body = messages_body(
      "hi",
      {{"system", "Be brief."}, {"stop_sequences", {"END"}}, {"temperature", 0.5}, {"top_k", 3}});
  HttpReply r = s.post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(j["content"], Json::parse(R"([{"type": "text", "text": "Hello world"}])"));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  GenerationRequest sent = s.engine.requests()[0];
  std::vector<int32_t> prompt =
      Tokenizer::load(llama_dir())
          ->encode(
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
              "<|im_start|>assistant\n",
              false);
  EXPECT_EQ(sent.prompt, prompt);
  EXPECT_EQ(sent.max_tokens, 32);
  EXPECT_EQ(sent.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(sent.sampling.temperature, 0.5f);
  EXPECT_EQ(sent.sampling.top_k, 3);
  EXPECT_EQ(j["usage"]["input_tokens"], prompt.size());
  EXPECT_EQ(j["usage"]["output_tokens"], 2);
}

TEST(Messages, StopReasons) {
  TestServer s;
  s.engine.script = [](int index, const GenerationRequest&) {
    if (index == 0)
      return std::vector<StreamChunk>{final_chunk(FinishReason::Stop, 1, 1, "x", "END")};
    return std::vector<StreamChunk>{final_chunk(FinishReason::Length, 1, 32, "x")};
  };
  Json a = s.post("/v1/messages", messages_body("hi")).json();
  EXPECT_EQ(a["stop_reason"], "stop_sequence");
  EXPECT_EQ(a["stop_sequence"], "END");
  Json b = s.post("/v1/messages", messages_body("hi")).json();
  EXPECT_EQ(b["stop_reason"], "max_tokens");
}

TEST(Messages, StreamingEventOrder) {
  TestServer s;
  HttpReply r = s.post("/v1/messages", messages_body("hi", {{"stream", true}}));
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<SseEvent> events = parse_sse(r.body);
  std::vector<std::string> names = event_names(events);
  std::vector<std::string> expected = {"message_start",       "ping",
                                       "content_block_start", "content_block_delta",
                                       "content_block_delta", "content_block_stop",
                                       "message_delta",       "message_stop"};
  EXPECT_EQ(names, expected);
  Json start = Json::parse(events[0].data);
  EXPECT_TRUE(start["message"]["content"].empty());
  EXPECT_TRUE(start["message"]["stop_reason"].is_null());
  std::string text;
  for (const SseEvent& e : events)
    if (e.event == "content_block_delta")
      text += Json::parse(e.data)["delta"]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello world");
  Json delta = Json::parse(events[6].data);
  EXPECT_EQ(delta["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(delta["usage"]["output_tokens"], 2);
}

TEST(Messages, ToolUseBlocks) {
  TestServer s;
  std::string text =
      "Checking.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}</tool_call>";
  s.engine.script = [text](int, const GenerationRequest&) {
    std::vector<StreamChunk> chunks;
    for (size_t i = 0; i < text.size(); i += 4)
      chunks.push_back(text_chunk(text.substr(i, 4), {5}));
    chunks.push_back(final_chunk(FinishReason::Stop, 1, int(chunks.size())));
    return chunks;
  };
  Json tools = Json::parse(R"([{"name": "get_weather", "description": "Weather",
      "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  Json j = s.post("/v1/messages", messages_body("weather?", {{"tools", tools}})).json();
  ASSERT_EQ(j["content"].size(), 2u) << j.dump();
  EXPECT_EQ(j["content"][0], Json({{"type", "text"}, {"text", "Checking."}}));
  EXPECT_EQ(j["content"][1]["type"], "tool_use");
  EXPECT_EQ(j["content"][1]["name"], "get_weather");
  EXPECT_EQ(j["content"][1]["input"], Json({{"city", "Oslo"}}));
  EXPECT_EQ(j["content"][1]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(j["stop_reason"], "tool_use");

  HttpReply r =
      s.post("/v1/messages", messages_body("weather?", {{"tools", tools}, {"stream", true}}));
  std::vector<SseEvent> events = parse_sse(r.body);
  std::vector<std::string> names = event_names(events);
  std::string streamed_text, partial_json;
  int tool_block = -1;
  for (const SseEvent& e : events) {
    Json d = Json::parse(e.data);
    if (e.event == "content_block_start" && d["content_block"]["type"] == "tool_use") {
      tool_block = d["index"];
      EXPECT_EQ(d["content_block"]["name"], "get_weather");
    }
    if (e.event == "content_block_delta" && d["delta"]["type"] == "text_delta")
      streamed_text += d["delta"]["text"].get<std::string>();
    if (e.event == "content_block_delta" && d["delta"]["type"] == "input_json_delta") {
      EXPECT_EQ(d["index"], tool_block);
      partial_json += d["delta"]["partial_json"].get<std::string>();
    }
    if (e.event == "message_delta") {
      EXPECT_EQ(d["delta"]["stop_reason"], "tool_use");
    }
  }
  EXPECT_EQ(streamed_text, "Checking.");
  EXPECT_EQ(tool_block, 1);
  EXPECT_EQ(Json::parse(partial_json), Json({{"city", "Oslo"}}));
  EXPECT_EQ(names.back(), "message_stop");
}

TEST(Messages, CountTokens) {
  TestServer s;
  Json j = s.post("/v1/messages/count_tokens", messages_body("hi")).json();
  EXPECT_EQ(j["input_tokens"],
            Tokenizer::load(llama_dir())
                ->encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false)
                .size());
}

}  // namespace anthropic_http_test
}  // namespace tandem::server::testing
