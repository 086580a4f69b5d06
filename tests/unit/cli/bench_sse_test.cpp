// The bench's stream reader: SSE framing of a recorded /v1/completions stream, fed whole,
// split at every byte position and byte by byte; the usage chunk; errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/bench/sse_stream.h"

namespace tandem::cli::bench {
namespace bench_sse_test {

// A stream as an OpenAI-compatible server sends it (the shape of tandem's and vLLM's):
// two text chunks, an empty-text chunk that carries a token id, the finish chunk, the
// usage chunk, [DONE].
const std::string kRecorded =
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Hel","logprobs":null,"finish_reason":null}]})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"lo ","logprobs":null,"finish_reason":null}]})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"","token_ids":[300],"finish_reason":null}]})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}})"
    "\n\n"
    "data: [DONE]\n\n";

std::vector<std::string> events_of(const std::vector<std::string>& pieces) {
  std::vector<std::string> events;
  SseParser parser([&](std::string_view data) { events.emplace_back(data); });
  for (const auto& p : pieces) parser.feed(p);
  return events;
}

TEST(BenchSse, SplitsAtAnyByteGiveTheSameEvents) {
  std::vector<std::string> whole = events_of({kRecorded});
  ASSERT_EQ(whole.size(), 6u);
  EXPECT_EQ(whole.back(), "[DONE]");
  EXPECT_EQ(whole[0].substr(0, 13), R"({"id":"cmpl-1)");
  for (size_t k = 0; k <= kRecorded.size(); ++k)
    ASSERT_EQ(events_of({kRecorded.substr(0, k), kRecorded.substr(k)}), whole) << "split at " << k;
  std::vector<std::string> bytes;
  for (char c : kRecorded) bytes.emplace_back(1, c);
  EXPECT_EQ(events_of(bytes), whole);
}

TEST(BenchSse, CrlfCommentsEventLinesAndMultiLineData) {
  std::string s =
      ": keep-alive\r\nevent: message\r\nid: 4\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata:[DONE]\n\n";
  std::vector<std::string> events = events_of({s});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "{\"a\":\n1}");  // data lines joined by '\n'
  EXPECT_EQ(events[1], "[DONE]");       // no space after the colon is fine too
}

TEST(BenchSse, IncompleteEventIsNotDispatched) {
  std::vector<std::string> events;
  SseParser parser([&](std::string_view data) { events.emplace_back(data); });
  parser.feed("data: {\"x\":1}\n");  // no blank line yet
  EXPECT_TRUE(events.empty());
  parser.feed("data: {\"y\"");
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(parser.num_pending_bytes(), 10u);
  parser.feed(":2}\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "{\"x\":1}\n{\"y\":2}");
}

TEST(BenchSse, TallyCountsContentUsageFinishAndDone) {
  StreamTally tally;
  std::vector<bool> content;
  for (const std::string& e : events_of({kRecorded}))
    content.push_back(tally_completion_event(e, tally));
  EXPECT_EQ(content, (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_EQ(tally.num_content_chunks, 3);
  ASSERT_TRUE(tally.usage_completion_tokens.has_value());
  EXPECT_EQ(*tally.usage_completion_tokens, 7);  // usage wins over the chunk count
  EXPECT_EQ(*tally.usage_prompt_tokens, 3);
  EXPECT_EQ(tally.finish_reason, "length");
  EXPECT_TRUE(tally.done);
  EXPECT_FALSE(tally.error.has_value());
}

TEST(BenchSse, ErrorPayloadAndMalformedChunk) {
  StreamTally tally;
  EXPECT_FALSE(tally_completion_event(
      R"({"error":{"message":"engine stopped","type":"server_error","param":null,"code":null}})",
      tally));
  ASSERT_TRUE(tally.error.has_value());
  EXPECT_EQ(*tally.error, "engine stopped");
  StreamTally bad;
  EXPECT_FALSE(tally_completion_event("{not json", bad));
  ASSERT_TRUE(bad.error.has_value());
  EXPECT_NE(bad.error->find("malformed"), std::string::npos);
  EXPECT_FALSE(bad.done);
}

}  // namespace bench_sse_test
}  // namespace tandem::cli::bench
