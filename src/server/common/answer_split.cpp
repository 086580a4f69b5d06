#include "server/common/answer_split.h"

namespace tandem::server {

void AnswerParts::append(AnswerParts more) {
  reasoning += more.reasoning;
  content += more.content;
  for (ToolCall& c : more.calls) calls.push_back(std::move(c));
}

AnswerParts split_answer(std::string_view text, const ReasoningSplit& reasoning,
                         bool find_tool_calls) {
  AnswerParts out;
  if (reasoning.on()) {
    ReasoningDelta split = split_reasoning(*reasoning.syntax, reasoning.start, text);
    out.reasoning = std::move(split.reasoning);
    out.content = std::move(split.content);
  } else {
    out.content = std::string(text);
  }
  if (find_tool_calls) {
    ToolCallParse parsed = parse_tool_calls(out.content);
    out.content = std::move(parsed.content);
    out.calls = std::move(parsed.calls);
  }
  return out;
}

AnswerStream::AnswerStream(const ReasoningSplit& reasoning, bool find_tool_calls) {
  if (reasoning.on()) reasoning_.emplace(*reasoning.syntax, reasoning.start);
  if (find_tool_calls) tools_.emplace();
}

void AnswerStream::add_calls(ToolCallStream::Delta delta, AnswerParts& out) {
  out.content += delta.content;
  for (ToolCall& c : delta.calls) out.calls.push_back(std::move(c));
}

void AnswerStream::add_content(std::string_view text, AnswerParts& out) {
  if (tools_)
    add_calls(tools_->push(text), out);
  else
    out.content += text;
}

AnswerParts AnswerStream::push(std::string_view text) {
  AnswerParts out;
  if (!reasoning_) {
    add_content(text, out);
    return out;
  }
  ReasoningDelta split = reasoning_->push(text);
  out.reasoning = std::move(split.reasoning);
  add_content(split.content, out);
  return out;
}

AnswerParts AnswerStream::finish() {
  AnswerParts out;
  if (reasoning_) {
    ReasoningDelta rest = reasoning_->finish();
    out.reasoning = std::move(rest.reasoning);
    add_content(rest.content, out);
  }
  if (tools_) add_calls(tools_->finish(), out);
  return out;
}

AnswerParts AnswerStream::take(const StreamChunk& chunk) {
  AnswerParts out = push(chunk.text);
  if (chunk.finish) out.append(finish());
  return out;
}

}  // namespace tandem::server
