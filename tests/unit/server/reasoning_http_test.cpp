// Reasoning over HTTP (issue 43), on the FakeEngine. The OpenAI routes: chat completions return
// message.reasoning_content (and vLLM's `reasoning`), streamed as delta fields before the content
// deltas, equal to the whole; /v1/responses returns a reasoning item, streamed with its own events;
// what the engine is asked for (a budget, the grammar after the thinking, thinking off); tool calls
// from the answer only.
#include <gtest/gtest.h>

#include "reasoning_server.h"

namespace tandem::server::testing {
namespace reasoning_http_test {

struct Split {
  std::string reasoning, content;
};

// The chat stream's reasoning and content deltas, checking that no content comes before
// the last reasoning delta and that every delta carries both reasoning names alike.
Split stream_split(const std::string& body) {
  Split out;
  for (const SseEvent& e : parse_sse(body)) {
    if (e.data == "[DONE]") continue;
    Json chunk = Json::parse(e.data);
    if (chunk["choices"].empty()) continue;
    const Json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      EXPECT_EQ(delta["reasoning"], delta["reasoning_content"]);
      EXPECT_EQ(out.content, "") << "reasoning after content";
      out.reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("content") && delta["content"].is_string())
      out.content += delta["content"].get<std::string>();
  }
  return out;
}

TEST(ReasoningChat, MessageAndStreamSplitTheThinkingAlike) {
  TestServer s({}, false);
  s.make_ready(thinking_model(s.engine, "Qwen-Qwen3-0.6B"));  // auto: qwen3
  s.engine.script = [](int, const GenerationRequest& r) { return thinking_chunks(r); };
  HttpReply r = s.post("/v1/chat/completions", chat_body("hi"));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json message = r.json()["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Let me think.");
  EXPECT_EQ(message["reasoning"], "Let me think.");
  EXPECT_EQ(message["content"], "The answer.");
  // Nothing for the engine to do: no budget, no grammar.
  EXPECT_FALSE(s.engine.requests()[0].thinking);
  HttpReply streamed = s.post("/v1/chat/completions", chat_body("hi", {{"stream", true}}));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  Split split = stream_split(streamed.body);
  EXPECT_EQ(split.reasoning, "Let me think.");
  EXPECT_EQ(split.content, "The answer.");
}

TEST(ReasoningChat, BudgetAndGrammarGoToTheEngine) {
  TestServer s({}, false);
  s.make_ready(thinking_model(s.engine, "Qwen3.5-4B"));  // opens "<think>\n" itself
  ASSERT_EQ(s.post("/v1/chat/completions", chat_body("hi", {{"thinking_token_budget", 7}})).status,
            200);
  GenerationRequest sent = s.engine.requests().back();
  ASSERT_TRUE(sent.thinking);
  EXPECT_TRUE(sent.thinking->starts_open);
  EXPECT_EQ(sent.thinking->budget, 7);
  EXPECT_TRUE(sent.skip_special_tokens);  // "<think>" is text to this tokenizer
  // /v1/responses takes the same budget.
  Json responses = {{"model", "test-model"}, {"input", "hi"}, {"thinking_token_budget", 5}};
  HttpReply r = s.post("/v1/responses", responses);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(s.engine.requests().back().thinking);
  EXPECT_EQ(s.engine.requests().back().thinking->budget, 5);
  responses["thinking_token_budget"] = -1;
  r = s.post("/v1/responses", responses);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "thinking_token_budget") << r.body;
  // A schema: followed without a budget, so the grammar starts after the thinking.
  Json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  Json body = chat_body(
      "hi", {{"response_format",
              {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}});
  ASSERT_EQ(s.post("/v1/chat/completions", body).status, 200);
  sent = s.engine.requests().back();
  ASSERT_TRUE(sent.thinking);
  EXPECT_FALSE(sent.thinking->budget);
  EXPECT_TRUE(sent.grammar);
  // Thinking off: the prompt closes the block; the engine follows nothing, the output is
  // all content.
  s.engine.script = [](int, const GenerationRequest& r) { return thinking_chunks(r); };
  HttpReply off = s.post("/v1/chat/completions",
                         chat_body("hi", {{"chat_template_kwargs", {{"enable_thinking", false}}},
                                          {"thinking_token_budget", 7}}));
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_FALSE(s.engine.requests().back().thinking);
  const Json message = off.json()["choices"][0]["message"];
  EXPECT_TRUE(message["reasoning_content"].is_null());
  EXPECT_EQ(message["content"], "<think>\nLet me think.\n</think>\n\nThe answer.");
}

TEST(ReasoningChat, ToolCallsComeFromTheAnswerOnly) {
  TestServer s({}, false);
  s.engine.info().max_model_len = 4096;  // Qwen3's tool instructions are long
  s.make_ready(thinking_model(s.engine, "Qwen-Qwen3-0.6B"));
  const std::string call =
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  s.engine.script = [call](int, const GenerationRequest& r) {
    return std::vector<StreamChunk>{text_chunk("<think>maybe " + call + "</think>\n\n" + call, {1}),
                                    final_chunk(FinishReason::Stop, int(r.prompt.size()), 1)};
  };
  Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}])");
  for (bool stream : {false, true}) {
    HttpReply r =
        s.post("/v1/chat/completions", chat_body("hi", {{"tools", tools}, {"stream", stream}}));
    ASSERT_EQ(r.status, 200) << r.body;
    int calls = 0;
    std::string reasoning;
    if (!stream) {
      const Json message = r.json()["choices"][0]["message"];
      calls = int(message["tool_calls"].size());
      reasoning = message["reasoning_content"];
      EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "tool_calls");
    } else {
      for (const SseEvent& e : parse_sse(r.body)) {
        if (e.data == "[DONE]") continue;
        const Json delta = Json::parse(e.data)["choices"][0]["delta"];
        calls += int(delta.value("tool_calls", Json::array()).size());
        reasoning += delta.value("reasoning_content", std::string());
      }
    }
    EXPECT_EQ(calls, 1) << r.body;
    EXPECT_EQ(reasoning, "maybe " + call);
  }
}

TEST(ReasoningChat, ABudgetNeedsAParser) {
  TestServer s;  // the oracle's plain ChatML template: auto finds no format
  HttpReply r = s.post("/v1/chat/completions", chat_body("hi", {{"thinking_token_budget", 5}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "thinking_token_budget");
  EXPECT_NE(r.body.find("--reasoning-parser"), std::string::npos) << r.body;
  r = s.post("/v1/responses",
             {{"model", "test-model"}, {"input", "hi"}, {"thinking_token_budget", 5}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "thinking_token_budget") << r.body;
  // And no reasoning fields at all without a parser.
  Json message = s.post("/v1/chat/completions", chat_body("hi")).json()["choices"][0]["message"];
  EXPECT_FALSE(message.contains("reasoning_content"));
}

TEST(ReasoningResponses, AReasoningItemWholeAndStreamed) {
  TestServer s({}, false);
  s.make_ready(thinking_model(s.engine, "Qwen-Qwen3-0.6B"));
  s.engine.script = [](int, const GenerationRequest& r) { return thinking_chunks(r); };
  Json body = {{"model", "test-model"}, {"input", "hi"}};
  HttpReply r = s.post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json output = r.json()["output"];
  ASSERT_EQ(output.size(), 2u) << output.dump();
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(output[0]["summary"], Json::array());
  EXPECT_EQ(output[0]["content"],
            Json::parse(R"([{"type": "reasoning_text", "text": "Let me think."}])"));
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["content"][0]["text"], "The answer.");

  body["stream"] = true;
  HttpReply streamed = s.post("/v1/responses", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::vector<std::string> names;
  std::string reasoning, text;
  Json completed;
  for (const SseEvent& e : parse_sse(streamed.body)) {
    Json j = Json::parse(e.data);
    if (names.empty() || names.back() != e.event) names.push_back(e.event);
    if (e.event == "response.reasoning_text.delta") reasoning += j["delta"].get<std::string>();
    if (e.event == "response.output_text.delta") text += j["delta"].get<std::string>();
    if (e.event == "response.reasoning_text.done") {
      EXPECT_EQ(j["text"], "Let me think.");
    }
    if (e.event == "response.completed") completed = j["response"];
  }
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.completed"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(reasoning, "Let me think.");
  EXPECT_EQ(text, "The answer.");
  ASSERT_EQ(completed["output"].size(), 2u);
  EXPECT_EQ(completed["output"][0]["content"], output[0]["content"]);
}

// Anthropic thinking: `thinking` content blocks, whole and streamed
// (content_block_start of type thinking, thinking_delta, a signature_delta before its
// content_block_stop), and the request's thinking {type: enabled, budget_tokens} /
// {type: disabled}; Gemma 4, whose delimiters are control tokens, keeps special tokens in
// the row's text so the parser sees them.

Json messages_body(Json extra = Json::object()) {
  Json body = {{"model", "test-model"},
               {"max_tokens", 64},
               {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

std::string prompt_text(const TestServer& s, const GenerationRequest& r) {
  return Tokenizer::load(llama_dir())->decode(r.prompt, false);
}

TEST(Thinking, BlocksWholeAndStreamed) {
  TestServer s({}, false);
  s.make_ready(thinking_model(s.engine, "deepseek-ai-DeepSeek-R1-Distill-Llama-8B"));
  s.engine.script = [](int, const GenerationRequest& r) { return thinking_chunks(r); };
  HttpReply r = s.post("/v1/messages", messages_body());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["content"], Json::parse(R"([
      {"type": "thinking", "thinking": "Let me think.", "signature": ""},
      {"type": "text", "text": "The answer."}])"));

  HttpReply streamed = s.post("/v1/messages", messages_body({{"stream", true}}));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::vector<std::string> steps;  // "start thinking@0", "thinking_delta@0", ...
  std::string thinking, text;
  for (const SseEvent& e : parse_sse(streamed.body)) {
    Json j = Json::parse(e.data);
    std::string step;
    if (e.event == "content_block_start")
      step = "start " + j["content_block"]["type"].get<std::string>();
    if (e.event == "content_block_delta") step = j["delta"]["type"];
    if (e.event == "content_block_stop") step = "stop";
    if (step.empty()) continue;
    step += "@" + std::to_string(j["index"].get<int>());
    if (steps.empty() || steps.back() != step) steps.push_back(step);
    if (step == "thinking_delta@0") thinking += j["delta"]["thinking"].get<std::string>();
    if (step == "text_delta@1") text += j["delta"]["text"].get<std::string>();
    if (step == "start thinking@0") {
      EXPECT_EQ(j["content_block"]["thinking"], "");
    }
  }
  const std::vector<std::string> expected = {"start thinking@0",
                                             "thinking_delta@0",
                                             "signature_delta@0",
                                             "stop@0",
                                             "start text@1",
                                             "text_delta@1",
                                             "stop@1"};
  EXPECT_EQ(steps, expected);
  EXPECT_EQ(thinking, "Let me think.");
  EXPECT_EQ(text, "The answer.");
}

TEST(Thinking, TheRequestTurnsThinkingOnAndOffAndBoundsIt) {
  TestServer s({}, false);
  s.make_ready(thinking_model(s.engine, "Qwen-Qwen3-0.6B"));
  HttpReply on = s.post(
      "/v1/messages", messages_body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 12}}}}));
  ASSERT_EQ(on.status, 200) << on.body;
  GenerationRequest sent = s.engine.requests().back();
  ASSERT_TRUE(sent.thinking);
  EXPECT_EQ(sent.thinking->budget, 12);
  EXPECT_FALSE(sent.thinking->starts_open);  // Qwen3 opens <think> itself
  ASSERT_EQ(s.post("/v1/messages", messages_body({{"thinking", {{"type", "disabled"}}}})).status,
            200);
  sent = s.engine.requests().back();
  EXPECT_FALSE(sent.thinking);
  // Qwen3's template writes an empty block when thinking is off.
  EXPECT_NE(prompt_text(s, sent).find("<think>\n\n</think>"), std::string::npos);
  HttpReply bad = s.post("/v1/messages", messages_body({{"thinking", {{"type", "sometimes"}}}}));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("thinking.type"), std::string::npos) << bad.body;
  bad = s.post("/v1/messages", messages_body({{"thinking", {{"type", "enabled"}}}}));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("budget_tokens"), std::string::npos) << bad.body;
}

TEST(Thinking, WithoutAParserTheFieldIsAccepted) {
  TestServer s;  // plain ChatML: no parser; Anthropic clients send `thinking` routinely
  HttpReply r =
      s.post("/v1/messages",
             messages_body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(s.engine.requests()[0].thinking);
  EXPECT_EQ(r.json()["content"][0]["type"], "text");
}

// Gemma 4's delimiters are control tokens of its tokenizer: a thinking row keeps special
// tokens in its text (else the parser would never see where the thinking ends); a row whose
// prompt turned thinking off does not.
TEST(Thinking, ControlTokenDelimitersKeepSpecialTokens) {
  auto j = nlohmann::json::parse(byte_level_tokenizer_json(300));
  int id = 300;
  for (const char* d : {"<|channel>", "<channel|>"})
    j["added_tokens"].push_back({{"id", id++},
                                 {"content", d},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  TestServer s({}, false);
  s.make_ready(thinking_model(s.engine, "google-gemma-4-31B-it", "gemma4",
                              Tokenizer::from_json_text(j.dump())));
  s.engine.script = [](int, const GenerationRequest& r) {
    return std::vector<StreamChunk>{text_chunk("<|channel>thought\nHmm.<channel|>Yes.", {1}),
                                    final_chunk(FinishReason::Stop, int(r.prompt.size()), 1)};
  };
  HttpReply on = s.post("/v1/chat/completions",
                        chat_body("hi", {{"chat_template_kwargs", {{"enable_thinking", true}}},
                                         {"skip_special_tokens", true}}));
  ASSERT_EQ(on.status, 200) << on.body;
  EXPECT_FALSE(s.engine.requests().back().skip_special_tokens);
  EXPECT_EQ(on.json()["choices"][0]["message"]["reasoning_content"], "Hmm.");
  EXPECT_EQ(on.json()["choices"][0]["message"]["content"], "Yes.");
  ASSERT_EQ(s.post("/v1/chat/completions", chat_body("hi")).status, 200);  // thinking off
  EXPECT_TRUE(s.engine.requests().back().skip_special_tokens);
}

}  // namespace reasoning_http_test
}  // namespace tandem::server::testing
