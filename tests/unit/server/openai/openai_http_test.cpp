// /v1/chat/completions and /v1/completions through a real server over the FakeEngine:
// what reaches the engine, and the response shapes, whole and streamed.
#include <gtest/gtest.h>

#include "../test_server.h"

namespace tandem::server::testing {
namespace openai_http_test {

std::shared_ptr<const Tokenizer> llama_tokenizer() {
  static auto tok = Tokenizer::load(llama_dir());
  return tok;
}

std::vector<int32_t> chatml_ids(const std::string& user_text) {
  return llama_tokenizer()->encode(
      "<|im_start|>user\n" + user_text + "<|im_end|>\n<|im_start|>assistant\n", false);
}

std::string token_text(int32_t id) {
  return llama_tokenizer()->decode(std::vector<int32_t>{id}, false);
}

// The JSON payloads of an OpenAI stream; checks that it ends with [DONE] and nothing after.
std::vector<Json> openai_stream(const HttpReply& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.content_type.find("text/event-stream"), std::string::npos);
  std::vector<SseEvent> events = parse_sse(r.body);
  std::vector<Json> out;
  EXPECT_FALSE(events.empty());
  if (events.empty()) return out;
  EXPECT_EQ(events.back().data, "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i].event, "");
    out.push_back(Json::parse(events[i].data));
  }
  return out;
}

const char* kToolCallText =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
}

TEST(ChatCompletions, NonStreaming) {
  TestServer s;
  Json body = chat_body("hi", {{"temperature", 0}, {"top_k", 5}, {"seed", 3}});
  HttpReply r = s.post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "test-model");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello world");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  std::vector<int32_t> prompt = chatml_ids("hi");
  EXPECT_EQ(j["usage"], Json({{"prompt_tokens", prompt.size()},
                              {"completion_tokens", 2},
                              {"total_tokens", prompt.size() + 2},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  ASSERT_EQ(s.engine.requests().size(), 1u);
  GenerationRequest sent = s.engine.requests()[0];
  EXPECT_EQ(sent.prompt, prompt);
  EXPECT_EQ(sent.max_tokens, 256 - int(prompt.size()));  // the rest of the context
  EXPECT_TRUE(sent.sampling.greedy());
  EXPECT_EQ(sent.sampling.top_k, 5);
  EXPECT_EQ(*sent.sampling.seed, 3u);
  EXPECT_EQ(sent.top_logprobs, -1);
}

TEST(ChatCompletions, StreamingFraming) {
  TestServer s;
  HttpReply r =
      s.post("/v1/chat/completions",
             chat_body("hi", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  std::vector<Json> chunks = openai_stream(r);
  ASSERT_GE(chunks.size(), 4u);
  std::string id = chunks[0]["id"];
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  std::string content;
  int finishes = 0;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(chunks[i]["id"], id);
    const Json& c = chunks[i]["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) {
      EXPECT_EQ(c["finish_reason"], "stop");
      ++finishes;
    }
  }
  EXPECT_EQ(content, "Hello world");
  EXPECT_EQ(finishes, 1);
  const Json& usage_chunk = chunks.back();
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 2);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], chatml_ids("hi").size());
}

TEST(ChatCompletions, ChoicesGetSeedsAndShareThePromptCount) {
  TestServer s;
  Json j = s.post("/v1/chat/completions", chat_body("hi", {{"n", 3}, {"seed", 7}})).json();
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["usage"]["prompt_tokens"], chatml_ids("hi").size());  // once, not 3 times
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  auto sent = s.engine.requests();
  ASSERT_EQ(sent.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*sent[i].sampling.seed, uint64_t(7 + i));
}

TEST(ChatCompletions, StreamedChoicesAreIndexed) {
  TestServer s;
  std::vector<Json> chunks =
      openai_stream(s.post("/v1/chat/completions", chat_body("hi", {{"n", 2}, {"stream", true}})));
  std::string content[2];
  int finishes[2] = {0, 0};
  for (const Json& c : chunks) {
    int i = c["choices"][0]["index"];
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) content[i] += delta["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) ++finishes[i];
  }
  EXPECT_EQ(content[0], "Hello world");
  EXPECT_EQ(content[1], "Hello world");
  EXPECT_EQ(finishes[0], 1);
  EXPECT_EQ(finishes[1], 1);
}

TEST(ChatCompletions, StopsAndFinishReasons) {
  TestServer s;
  s.engine.script = [](int index, const GenerationRequest& r) {
    if (index == 0)
      return std::vector<StreamChunk>{text_chunk("abc", {5}),
                                      final_chunk(FinishReason::Stop, 3, 1, "", "END")};
    return std::vector<StreamChunk>{text_chunk("abc", {5}),
                                    final_chunk(FinishReason::Length, 3, 1)};
  };
  Json j = s.post("/v1/chat/completions",
                  chat_body("hi", {{"stop", {"END", "\n\n"}}, {"max_tokens", 1}}))
               .json();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "END");
  EXPECT_EQ(s.engine.requests()[0].stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_EQ(s.engine.requests()[0].max_tokens, 1);
  Json k = s.post("/v1/chat/completions", chat_body("hi", {{"stop", "END"}})).json();
  EXPECT_EQ(k["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(s.engine.requests()[1].stop, std::vector<std::string>{"END"});
}

TEST(ChatCompletions, LogprobsInTheChatShape) {
  TestServer s;
  s.engine.script = [](int, const GenerationRequest& r) {
    StreamChunk c = text_chunk("xy");
    c.tokens = {GeneratedToken{120, -0.1f, {{120, -0.1f}, {121, -2.5f}, {7, -4.f}}},
                GeneratedToken{121, -0.2f, {{121, -0.2f}, {120, -1.9f}, {8, -4.f}}}};
    return std::vector<StreamChunk>{c, final_chunk(FinishReason::Stop, 3, 2)};
  };
  Json j =
      s.post("/v1/chat/completions", chat_body("hi", {{"logprobs", true}, {"top_logprobs", 2}}))
          .json();
  EXPECT_EQ(s.engine.requests()[0].top_logprobs, 2);
  const Json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], token_text(120));
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.1f);
  EXPECT_EQ(content[1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[1]["top_logprobs"][1]["token"], token_text(120));
  EXPECT_FLOAT_EQ(content[1]["top_logprobs"][1]["logprob"].get<float>(), -1.9f);
  std::string t = token_text(121);
  EXPECT_EQ(content[1]["bytes"].size(), t.size());
  // Streamed: the same entries, spread over the chunks.
  std::vector<Json> chunks = openai_stream(
      s.post("/v1/chat/completions", chat_body("hi", {{"logprobs", true}, {"stream", true}})));
  size_t entries = 0;
  for (const Json& c : chunks)
    if (c["choices"][0]["logprobs"].is_object())
      entries += c["choices"][0]["logprobs"]["content"].size();
  EXPECT_EQ(entries, 2u);
}

TEST(ChatCompletions, ToolCallsParsed) {
  TestServer s;
  s.engine.script = pieces_of(kToolCallText, 1000);
  Json j =
      s.post("/v1/chat/completions", chat_body("weather?", {{"tools", weather_tools()}})).json();
  const Json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const Json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()),
            Json({{"city", "Paris"}}));
  // tool_choice "none": the same text is just content.
  Json none = s.post("/v1/chat/completions",
                     chat_body("weather?", {{"tools", weather_tools()}, {"tool_choice", "none"}}))
                  .json();
  EXPECT_EQ(none["choices"][0]["message"]["content"], kToolCallText);
  EXPECT_EQ(none["choices"][0]["finish_reason"], "stop");
}

TEST(ChatCompletions, ToolCallsStreamedAsDeltas) {
  TestServer s;
  s.engine.script = pieces_of(std::string("I'll check.") + kToolCallText, 3);
  std::vector<Json> chunks =
      openai_stream(s.post("/v1/chat/completions",
                           chat_body("weather?", {{"tools", weather_tools()}, {"stream", true}})));
  std::string content;
  std::vector<Json> calls;
  std::string finish;
  for (const Json& c : chunks) {
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls"))
      for (const Json& tc : delta["tool_calls"]) calls.push_back(tc);
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "I'll check.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            Json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ChatCompletions, EngineErrorMidStreamIsAnErrorEvent) {
  TestServer s;
  s.engine.script = [](int, const GenerationRequest&) {
    return std::vector<StreamChunk>{text_chunk("partial", {5}), error_chunk("device lost")};
  };
  std::vector<Json> chunks =
      openai_stream(s.post("/v1/chat/completions", chat_body("hi", {{"stream", true}})));
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back()["error"]["message"], "device lost");
  HttpReply whole = s.post("/v1/chat/completions", chat_body("hi"));
  EXPECT_EQ(whole.status, 500);
  EXPECT_EQ(whole.json()["error"]["message"], "device lost");
}

TEST(ChatCompletions, EngineFailureBeforeAnyTokenIsA500RefusalA400) {
  TestServer s;
  s.engine.script = [](int index, const GenerationRequest&) {
    StreamChunk c = error_chunk(index == 0 ? "step failed: out of memory" : "prompt too long");
    c.server_error = index == 0;
    return std::vector<StreamChunk>{c};
  };
  HttpReply failed = s.post("/v1/chat/completions", chat_body("hi"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.json()["error"]["type"], "server_error");
  HttpReply refused = s.post("/v1/chat/completions", chat_body("hi"));
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["error"]["type"], "invalid_request_error");
  HttpReply streamed = s.post("/v1/chat/completions", chat_body("hi", {{"stream", true}}));
  EXPECT_EQ(streamed.status, 400);  // the third request is refused too (index 2)
}

TEST(Completions, TextPrompt) {
  TestServer s;
  Json j = s.post("/v1/completions", Json{{"model", "test-model"}, {"prompt", "Once upon"}}).json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hello world");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  GenerationRequest sent = s.engine.requests()[0];
  EXPECT_EQ(sent.prompt, llama_tokenizer()->encode("Once upon", true));
  EXPECT_EQ(sent.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(j["usage"]["prompt_tokens"], sent.prompt.size());
}

TEST(Completions, TokenIdPromptsTimesNInOrder) {
  TestServer s;
  Json body = {{"prompt", {{1, 2, 3}, {4, 5}}}, {"n", 2}, {"max_tokens", 4}};
  Json j = s.post("/v1/completions", body).json();
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  auto sent = s.engine.requests();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0].prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(sent[1].prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(sent[2].prompt, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(sent[3].max_tokens, 4);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);  // each prompt counted once
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  Json single = s.post("/v1/completions", Json{{"prompt", {7, 8}}}).json();
  EXPECT_EQ(s.engine.requests()[4].prompt, (std::vector<int32_t>{7, 8}));
}

TEST(Completions, EchoAndTokenIds) {
  TestServer s;
  Json j = s.post("/v1/completions", Json{{"prompt", "abc"}, {"echo", true}}).json();
  EXPECT_EQ(j["choices"][0]["text"], "abcHello world");
  std::vector<int32_t> ids = llama_tokenizer()->encode("xyz", false);
  Json k =
      s.post("/v1/completions", Json{{"prompt", ids}, {"echo", true}, {"return_token_ids", true}})
          .json();
  EXPECT_EQ(k["choices"][0]["text"], "xyzHello world");
  EXPECT_EQ(k["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(k["choices"][0]["token_ids"], Json({72, 87}));
}

TEST(Completions, LogprobsInTheCompletionsShape) {
  TestServer s;
  s.engine.script = [](int, const GenerationRequest&) {
    StreamChunk c = text_chunk("");
    c.tokens = {GeneratedToken{120, -0.5f, {{120, -0.5f}, {121, -1.5f}}},
                GeneratedToken{121, -0.25f, {{121, -0.25f}, {120, -2.f}}}};
    c.text = token_text(120) + token_text(121);
    return std::vector<StreamChunk>{c, final_chunk(FinishReason::Length, 2, 2)};
  };
  Json j = s.post("/v1/completions", Json{{"prompt", {1, 2}}, {"logprobs", 1}}).json();
  EXPECT_EQ(s.engine.requests()[0].top_logprobs, 1);
  const Json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({token_text(120), token_text(121)}));
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -0.25f);
  EXPECT_EQ(lp["text_offset"], Json({0, token_text(120).size()}));
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
  EXPECT_FLOAT_EQ(lp["top_logprobs"][0][token_text(120)].get<float>(), -0.5f);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST(Completions, EchoWithLogprobsScoresThePromptTheLegacyWay) {
  TestServer s;
  // The engine's answer for a prompt of three tokens: logprobs of tokens 1 and 2.
  s.engine.script = [](int, const GenerationRequest& r) {
    StreamChunk last = final_chunk(FinishReason::Length, int(r.prompt.size()), 0);
    last.prompt_logprobs = {GeneratedToken{r.prompt[1], -1.5f, {{7, -0.5f}, {r.prompt[1], -1.5f}}},
                            GeneratedToken{r.prompt[2], -0.25f, {{r.prompt[2], -0.25f}, {9, -3.f}}}};
    return std::vector<StreamChunk>{last};
  };
  const std::vector<int32_t> ids = {120, 121, 122};
  Json j = s.post("/v1/completions",
                  Json{{"prompt", ids}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}})
               .json();
  const GenerationRequest sent = s.engine.requests()[0];  // requests() is a copy
  EXPECT_EQ(sent.max_tokens, 0);
  ASSERT_TRUE(sent.prompt_logprobs.has_value());
  EXPECT_EQ(sent.prompt_logprobs->first, 1);
  EXPECT_EQ(sent.prompt_logprobs->top, 1);
  const Json& c = j["choices"][0];
  EXPECT_EQ(c["text"], llama_tokenizer()->decode(ids, false));  // the echo, nothing after it
  EXPECT_EQ(c["finish_reason"], "length");
  const Json& lp = c["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({token_text(120), token_text(121), token_text(122)}));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -1.5f);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][2].get<float>(), -0.25f);
  EXPECT_EQ(lp["top_logprobs"][1].size(), 1u);  // logprobs: 1 alternative
  EXPECT_FLOAT_EQ(lp["top_logprobs"][1][token_text(7)].get<float>(), -0.5f);
  EXPECT_EQ(lp["text_offset"],
            Json({0, token_text(120).size(), token_text(120).size() + token_text(121).size()}));
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
}

TEST(Completions, EchoedPromptLogprobsComeBeforeTheGeneratedOnes) {
  TestServer s;
  s.engine.script = [](int, const GenerationRequest& r) {
    StreamChunk c = text_chunk(token_text(121));
    c.tokens = {GeneratedToken{121, -0.75f, {{121, -0.75f}}}};
    c.prompt_logprobs = {GeneratedToken{r.prompt[1], -2.f, {{r.prompt[1], -2.f}}}};
    return std::vector<StreamChunk>{c, final_chunk(FinishReason::Length, 2, 1)};
  };
  Json j = s.post("/v1/completions", Json{{"prompt", {120, 122}}, {"echo", true}, {"logprobs", 0},
                                          {"max_tokens", 1}})
               .json();
  const Json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({token_text(120), token_text(122), token_text(121)}));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -2.f);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][2].get<float>(), -0.75f);
  EXPECT_EQ(lp["text_offset"][2], token_text(120).size() + token_text(122).size());
  EXPECT_EQ(lp["top_logprobs"][2].size(), 0u);  // logprobs: 0, the chosen token's only
}

TEST(Completions, Streaming) {
  TestServer s;
  std::vector<Json> chunks =
      openai_stream(s.post("/v1/completions", Json{{"prompt", "abc"},
                                                   {"stream", true},
                                                   {"echo", true},
                                                   {"stream_options", {{"include_usage", true}}}}));
  std::string text;
  std::string finish;
  for (const Json& c : chunks) {
    if (c["choices"].empty()) continue;
    EXPECT_EQ(c["object"], "text_completion");
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "abcHello world");
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 2);
}

}  // namespace openai_http_test
}  // namespace tandem::server::testing
