#include "server/openai/chat_messages.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../expect_400.h"

namespace tandem::server {
namespace chat_messages_test {

TEST(ChatMessages, StringsAndTextPartsBecomeStrings) {
  Json in = Json::parse(R"([
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "42"}
  ])");
  Json out = normalize_openai_messages(in);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["role"], "system");
  EXPECT_EQ(out[1]["content"], "Hello\nthere");
  EXPECT_EQ(out[2]["content"], "");  // null content reaches templates as "" (vLLM's choice)
  EXPECT_EQ(out[2]["tool_calls"][0]["function"]["arguments"], Json({{"a", 1}}));
  EXPECT_EQ(out[3]["tool_call_id"], "call_1");
}

TEST(ChatMessages, BadInputIs400) {
  expect_400([] { normalize_openai_messages(Json::array()); }, "messages");
  expect_400([] { normalize_openai_messages(Json("hi")); }, "messages");
  expect_400(
      [] { normalize_openai_messages(Json::parse(R"([{"role": "wizard", "content": "x"}])")); },
      "messages[0].role");
  expect_400([] { normalize_openai_messages(Json::parse(R"([{"content": "x"}])")); },
             "messages[0].role");
  expect_400([] { normalize_openai_messages(Json::parse(R"([{"role": "user"}])")); },
             "messages[0].content");
  expect_400([] { normalize_openai_messages(Json::parse(R"([{"role": "user", "content": 5}])")); },
             "messages[0].content");
  expect_400(
      [] {
        normalize_openai_messages(Json::parse(
            R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])"));
      },
      "messages[0].content[0].type");
  expect_400([] { normalize_openai_messages(Json::parse(R"([1])")); }, "messages[0]");
}

TEST(ChatMessages, ToolsAndToolChoice) {
  EXPECT_TRUE(normalize_openai_tools(nullptr).is_null());
  Json tools = Json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  EXPECT_EQ(normalize_openai_tools(&tools), tools);
  Json bad = Json::parse(R"([{"type": "function", "function": {"description": "no name"}}])");
  expect_400([&] { normalize_openai_tools(&bad); }, "tools[0].function.name");
  Json none = "none", autoc = "auto",
       named = Json::parse(R"({"type": "function", "function": {"name": "f"}})");
  EXPECT_FALSE(tool_choice_allows_calls(&none));
  EXPECT_TRUE(tool_choice_allows_calls(&autoc));
  EXPECT_TRUE(tool_choice_allows_calls(&named));
  Json odd = "sometimes";
  expect_400([&] { tool_choice_allows_calls(&odd); }, "tool_choice");
}

}  // namespace chat_messages_test
}  // namespace tandem::server
