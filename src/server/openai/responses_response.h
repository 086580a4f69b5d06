// OpenAI Responses API output: the "response" object, whose `output` holds a `reasoning`
// item first when the model thought (its text as one `reasoning_text` content part; no
// summary), the assistant message item (when there is text, or nothing else) and one
// `function_call` item per tool call parsed out of the content (tool_calls.h); and the
// streamed events: response.created, response.in_progress, then per item
// response.output_item.added, for the reasoning response.content_part.added,
// response.reasoning_text.delta*, response.reasoning_text.done, response.content_part.done,
// for a message response.content_part.added, response.output_text.delta*,
// response.output_text.done, response.content_part.done, for a call
// response.function_call_arguments.delta and .done, and response.output_item.done; last
// response.completed (each with its sequence_number).
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/common/answer_split.h"
#include "server/common/generation_run.h"
#include "server/common/stream_encoder.h"
#include "server/common/tool_calls.h"

namespace tandem::server {

struct ResponsesFormat {
  int input_tokens = 0;
  // instructions, max_output_tokens, temperature, top_p, metadata, tools, tool_choice,
  // parallel_tool_calls
  Json echo = Json::object();
  std::string item_id;  // "msg_…", the output message's id
  bool parse_tool_calls = false;
  ReasoningSplit reasoning;
  std::string reasoning_id;  // "rs_…", the reasoning item's id
};

Json format_response(const ResponseMeta& meta, const ResponsesFormat& format,
                     const ChoiceResult& result);

class ResponsesStreamEncoder : public StreamEncoder {
 public:
  ResponsesStreamEncoder(ResponseMeta meta, ResponsesFormat format);
  std::string begin() override;
  std::string chunk(int choice, const StreamChunk& chunk) override;
  std::string end() override;
  std::string error(const std::string& message) override;

 private:
  std::string event(const char* type, Json fields);
  std::string emit(const AnswerParts& parts);
  std::string emit_reasoning(const std::string& text);
  std::string close_reasoning();
  std::string emit_call(const ToolCall& call);
  std::string open_message();
  std::string close_message();

  ResponseMeta meta_;
  ResponsesFormat format_;
  int sequence_ = 0;
  ChoiceResult result_;
  AnswerStream answer_;
  Json items_ = Json::array();             // the output items so far, finished ones complete
  std::optional<size_t> reasoning_index_;  // the reasoning item's place in items_, once opened
  bool reasoning_open_ = false;
  std::string reasoning_;                // its text so far
  std::optional<size_t> message_index_;  // the message item's place in items_, once opened
  std::string text_;                     // the message's text so far
};

}  // namespace tandem::server
