#include "server/anthropic/anthropic_messages.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../expect_400.h"

namespace tandem::server {
namespace anthropic_messages_test {

TEST(AnthropicMessages, SystemBlocksAndTools) {
  Json system = Json::parse(R"([{"type": "text", "text": "You are terse."}])");
  Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
       {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "cold"},
       {"type": "text", "text": "Thanks"}]}
  ])");
  Json out = anthropic_to_chat_messages(&system, messages);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0], Json({{"role", "system"}, {"content", "You are terse."}}));
  EXPECT_EQ(out[1]["content"], "Weather?");
  EXPECT_EQ(out[2]["content"], "Checking.");
  EXPECT_EQ(out[2]["tool_calls"][0]["function"]["arguments"], Json({{"city", "Oslo"}}));
  EXPECT_EQ(out[3], Json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "cold"}}));
  EXPECT_EQ(out[4], Json({{"role", "user"}, {"content", "Thanks"}}));
  Json tools = Json::parse(R"([{"name": "get_weather", "input_schema": {"type": "object"}}])");
  Json converted = anthropic_tools_to_chat(&tools);
  EXPECT_EQ(converted[0]["function"]["parameters"], Json({{"type", "object"}}));
}

TEST(AnthropicMessages, BadInputIs400) {
  expect_400([] { anthropic_to_chat_messages(nullptr, Json::array()); }, "messages");
  expect_400(
      [] {
        anthropic_to_chat_messages(nullptr, Json::parse(R"([{"role": "system", "content": "x"}])"));
      },
      "messages[0].role");
  expect_400(
      [] {
        anthropic_to_chat_messages(
            nullptr,
            Json::parse(R"([{"role": "user", "content": [{"type": "image", "source": {}}]}])"));
      },
      "messages[0].content[0].type");
}

}  // namespace anthropic_messages_test
}  // namespace tandem::server
