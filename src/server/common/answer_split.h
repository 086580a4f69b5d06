// One choice's output in the parts the chat APIs return apart: its reasoning (with a
// reasoning parser on: reasoning_parser.h), its content, and the tool calls parsed out of
// the content (tool_calls.h). Calls are looked for in the content only: a call the model
// wrote while thinking is part of its thinking. Whole (a non-streaming response) or in
// pieces (a stream); the parts of the pieces add up to the parts of the whole.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/common/reasoning_parser.h"
#include "server/common/tool_calls.h"

namespace tandem::server {

// How a request's output splits into reasoning and content: its format's syntax, and where
// its rendered prompt left the row (thinking_start).
struct ReasoningSplit {
  const ReasoningSyntax* syntax = nullptr;  // null: no parser; all output is content
  ThinkingStart start = ThinkingStart::MayOpen;
  bool on() const { return syntax != nullptr; }
};

struct AnswerParts {
  std::string reasoning;  // trimmed; "" when the row did not think
  std::string content;    // without the calls (trimmed when there are calls)
  std::vector<ToolCall> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  void append(AnswerParts more);
};

AnswerParts split_answer(std::string_view text, const ReasoningSplit& reasoning,
                         bool find_tool_calls);

class AnswerStream {
 public:
  AnswerStream(const ReasoningSplit& reasoning, bool find_tool_calls);

  AnswerParts push(std::string_view text);
  AnswerParts finish();  // end of the output: what is held comes out
  // push(chunk.text), and finish() too on the choice's last chunk.
  AnswerParts take(const StreamChunk& chunk);
  bool saw_calls() const { return tools_ && tools_->saw_calls(); }

 private:
  void add_content(std::string_view text, AnswerParts& out);
  void add_calls(ToolCallStream::Delta delta, AnswerParts& out);

  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallStream> tools_;
};

}  // namespace tandem::server
