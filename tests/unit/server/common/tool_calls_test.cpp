#include "server/common/tool_calls.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/common/json_text.h"

namespace tandem::server {
namespace tool_calls_test {

Json args(const ToolCall& c) {
  return Json::parse(c.arguments);
}

TEST(ToolCalls, HermesSingleCall) {
  ToolCallParse p = parse_tool_calls(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(args(p.calls[0]), Json({{"city", "Paris"}}));
  EXPECT_EQ(p.content, "");
}

TEST(ToolCalls, HermesContentBeforeAndSeveralCalls) {
  ToolCallParse p = parse_tool_calls(
      "Let me check.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "a");
  EXPECT_EQ(args(p.calls[0]), Json::object());
  EXPECT_EQ(p.calls[1].name, "b");
  EXPECT_EQ(args(p.calls[1]), Json({{"x", 1}}));  // a JSON-string argument is unwrapped
  EXPECT_EQ(p.content, "Let me check.");
}

TEST(ToolCalls, BrokenBlockStaysText) {
  std::string text = "<tool_call>{not json}</tool_call>";
  ToolCallParse p = parse_tool_calls(text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

TEST(ToolCalls, UnclosedBlockWithCompleteJsonCounts) {
  ToolCallParse p = parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1]}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(args(p.calls[0]), Json({{"a", {1}}}));
}

TEST(ToolCalls, LlamaJsonWithParameters) {
  ToolCallParse p = parse_tool_calls(
      "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"query\": \"tandem\"}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "search");
  EXPECT_EQ(args(p.calls[0]), Json({{"query", "tandem"}}));
  ToolCallParse bare = parse_tool_calls(" {\"name\": \"search\", \"parameters\": {}}");
  ASSERT_EQ(bare.calls.size(), 1u);
}

TEST(ToolCalls, LlamaJsonSeveralCalls) {
  auto semi = parse_json_tool_calls(
      "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": \"v;w\"}}");
  ASSERT_TRUE(semi);
  ASSERT_EQ(semi->size(), 2u);
  auto list = parse_json_tool_calls("[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\"}]");
  ASSERT_TRUE(list);
  EXPECT_EQ((*list)[1].name, "b");
  EXPECT_EQ((*list)[1].arguments, "{}");
}

TEST(ToolCalls, PlainJsonThatIsNotACallIsContent) {
  std::string text = "{\"answer\": 42}";
  ToolCallParse p = parse_tool_calls(text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

TEST(ToolCalls, PlainTextUntouched) {
  std::string text = "  Hello <tool and <b>bold</b>\n\n";
  EXPECT_EQ(parse_tool_calls(text).content, text);
}

// Feeding text one byte at a time yields the same content and calls as the whole text.
void expect_stream_matches(const std::string& text) {
  ToolCallStream stream;
  std::string content;
  std::vector<ToolCall> calls;
  for (char c : text) {
    ToolCallStream::Delta d = stream.push(std::string(1, c));
    content += d.content;
    for (auto& call : d.calls) calls.push_back(call);
  }
  ToolCallStream::Delta d = stream.finish();
  content += d.content;
  for (auto& call : d.calls) calls.push_back(call);
  ToolCallParse whole = parse_tool_calls(text);
  ASSERT_EQ(calls.size(), whole.calls.size()) << text;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].name, whole.calls[i].name);
    EXPECT_EQ(calls[i].arguments, whole.calls[i].arguments);
  }
  if (whole.calls.empty()) EXPECT_EQ(content, whole.content) << text;
}

TEST(ToolCalls, StreamedByteByByteMatchesWholeParse) {
  expect_stream_matches("Sure<tool_call>{\"name\": \"f\", \"arguments\": {\"q\": 1}}</tool_call>");
  expect_stream_matches(
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>");
  expect_stream_matches("{\"name\": \"f\", \"parameters\": {\"x\": \"y\"}}");
  expect_stream_matches("just text with < and <tool but no call\n");
  expect_stream_matches("<tool_call>{broken</tool_call> after");
}

TEST(ToolCalls, StreamHoldsBackAPartialTagOnly) {
  ToolCallStream stream;
  EXPECT_EQ(stream.push("Hi <tool_").content, "Hi ");  // "<tool_" might open a call
  ToolCallStream::Delta d = stream.push("x> there");
  EXPECT_EQ(d.content, "<tool_x> there");
  EXPECT_FALSE(stream.saw_calls());
}

TEST(ToolCalls, StreamEmitsCallWhenBlockCloses) {
  ToolCallStream stream;
  EXPECT_TRUE(stream.push("<tool_call>{\"name\": \"f\", ").empty());
  ToolCallStream::Delta d = stream.push("\"arguments\": {}}</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_TRUE(stream.saw_calls());
  EXPECT_TRUE(stream.push("\n").empty());
  EXPECT_TRUE(stream.finish().empty());  // whitespace after a call is not content
}

}  // namespace tool_calls_test
}  // namespace tandem::server
