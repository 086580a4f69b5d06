#include "server/openai/responses_response.h"

#include <nlohmann/json.hpp>

#include "server/common/ids.h"
#include "server/common/sse.h"

namespace tandem::server {
namespace {

Json output_text(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
}

Json message_item(const ResponsesFormat& f, const char* status, Json content) {
  return {{"type", "message"},
          {"id", f.item_id},
          {"status", status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

Json reasoning_text(const std::string& text) {
  return {{"type", "reasoning_text"}, {"text", text}};
}

Json reasoning_item(const ResponsesFormat& f, const char* status, Json content) {
  return {{"type", "reasoning"},
          {"id", f.reasoning_id},
          {"summary", Json::array()},
          {"content", std::move(content)},
          {"status", status}};
}

Json function_call_item(const ToolCall& call, const char* status, const std::string& arguments) {
  return {{"type", "function_call"},
          {"id", random_id("fc_")},
          {"call_id", random_id("call_")},
          {"name", call.name},
          {"arguments", arguments},
          {"status", status}};
}

Json responses_usage_json(int input_tokens, int output_tokens, int cached_tokens) {
  return {{"input_tokens", input_tokens},
          {"input_tokens_details", {{"cached_tokens", cached_tokens}}},
          {"output_tokens", output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input_tokens + output_tokens}};
}

// The response object around `output`; `result` null while in progress.
Json response_json(const ResponseMeta& meta, const ResponsesFormat& f, const ChoiceResult* result,
                   Json output) {
  bool done = result != nullptr;
  bool incomplete = done && result->finish == FinishReason::Length;
  Json r = {{"id", meta.id},
            {"object", "response"},
            {"created_at", meta.created},
            {"status", !done        ? "in_progress"
                       : incomplete ? "incomplete"
                                    : "completed"},
            {"error", Json()},
            {"incomplete_details", incomplete ? Json{{"reason", "max_output_tokens"}} : Json()},
            {"model", meta.model},
            {"output", std::move(output)},
            {"text", {{"format", {{"type", "text"}}}}},
            {"store", false},
            {"usage", done ? responses_usage_json(f.input_tokens, result->completion_tokens, result->cached_tokens)
                         : Json()}};
  for (auto it = f.echo.begin(); it != f.echo.end(); ++it) r[it.key()] = it.value();
  return r;
}

const char* item_status(const ChoiceResult& result) {
  return result.finish == FinishReason::Length ? "incomplete" : "completed";
}

}  // namespace

Json format_response(const ResponseMeta& meta, const ResponsesFormat& format,
                     const ChoiceResult& result) {
  AnswerParts answer = split_answer(result.text, format.reasoning, format.parse_tool_calls);
  Json output = Json::array();
  if (!answer.reasoning.empty())
    output.push_back(
        reasoning_item(format, "completed", Json::array({reasoning_text(answer.reasoning)})));
  if (!answer.content.empty() || answer.calls.empty())
    output.push_back(
        message_item(format, item_status(result), Json::array({output_text(answer.content)})));
  for (const ToolCall& call : answer.calls)
    output.push_back(function_call_item(call, "completed", call.arguments));
  return response_json(meta, format, &result, std::move(output));
}

ResponsesStreamEncoder::ResponsesStreamEncoder(ResponseMeta meta, ResponsesFormat format)
    : meta_(std::move(meta)),
      format_(std::move(format)),
      answer_(format_.reasoning, format_.parse_tool_calls) {}

std::string ResponsesStreamEncoder::event(const char* type, Json fields) {
  Json payload = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto it = fields.begin(); it != fields.end(); ++it) payload[it.key()] = it.value();
  return sse_event(type, payload);
}

// Events are appended one statement at a time: each takes the next sequence number.
std::string ResponsesStreamEncoder::begin() {
  Json in_progress = response_json(meta_, format_, nullptr, Json::array());
  std::string out = event("response.created", {{"response", in_progress}});
  out += event("response.in_progress", {{"response", in_progress}});
  return out;
}

std::string ResponsesStreamEncoder::open_message() {
  if (message_index_) return {};
  message_index_ = items_.size();
  items_.push_back(message_item(format_, "in_progress", Json::array()));
  const int index = int(*message_index_);
  std::string out = event("response.output_item.added", {{"output_index", index}, {"item", items_.back()}});
  out += event("response.content_part.added", {{"item_id", format_.item_id},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"part", output_text("")}});
  return out;
}

std::string ResponsesStreamEncoder::close_message() {
  if (!message_index_) return {};
  const int index = int(*message_index_);
  Json& item = items_[*message_index_];
  item = message_item(format_, item_status(result_), Json::array({output_text(text_)}));
  std::string out = event("response.output_text.done", {{"item_id", format_.item_id},
                                                        {"output_index", index},
                                                        {"content_index", 0},
                                                        {"text", text_},
                                                        {"logprobs", Json::array()}});
  out += event("response.content_part.done", {{"item_id", format_.item_id},
                                              {"output_index", index},
                                              {"content_index", 0},
                                              {"part", output_text(text_)}});
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  return out;
}

// The reasoning item: opened on the first reasoning text, closed when the answer begins
// (the reasoning always comes first) or at the end.
std::string ResponsesStreamEncoder::emit_reasoning(const std::string& text) {
  std::string out;
  if (!reasoning_index_) {
    reasoning_index_ = items_.size();
    reasoning_open_ = true;
    items_.push_back(reasoning_item(format_, "in_progress", Json::array()));
    out += event("response.output_item.added",
                 {{"output_index", int(*reasoning_index_)}, {"item", items_.back()}});
    out += event("response.content_part.added", {{"item_id", format_.reasoning_id},
                                                 {"output_index", int(*reasoning_index_)},
                                                 {"content_index", 0},
                                                 {"part", reasoning_text("")}});
  }
  reasoning_ += text;
  out += event("response.reasoning_text.delta", {{"item_id", format_.reasoning_id},
                                                 {"output_index", int(*reasoning_index_)},
                                                 {"content_index", 0},
                                                 {"delta", text}});
  return out;
}

std::string ResponsesStreamEncoder::close_reasoning() {
  if (!reasoning_open_) return {};
  reasoning_open_ = false;
  const int index = int(*reasoning_index_);
  Json& item = items_[*reasoning_index_];
  item = reasoning_item(format_, "completed", Json::array({reasoning_text(reasoning_)}));
  std::string out = event("response.reasoning_text.done", {{"item_id", format_.reasoning_id},
                                                           {"output_index", index},
                                                           {"content_index", 0},
                                                           {"text", reasoning_}});
  out += event("response.content_part.done", {{"item_id", format_.reasoning_id},
                                              {"output_index", index},
                                              {"content_index", 0},
                                              {"part", reasoning_text(reasoning_)}});
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  return out;
}

// Each call is an item of its own, whole: added, its arguments in one delta, done.
std::string ResponsesStreamEncoder::emit_call(const ToolCall& call) {
  const int index = int(items_.size());
  Json item = function_call_item(call, "in_progress", "");
  const std::string id = item["id"];
  std::string out = event("response.output_item.added", {{"output_index", index}, {"item", item}});
  out += event("response.function_call_arguments.delta",
               {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
  out += event("response.function_call_arguments.done",
               {{"item_id", id}, {"output_index", index}, {"arguments", call.arguments}});
  item["arguments"] = call.arguments;
  item["status"] = "completed";
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  items_.push_back(std::move(item));
  return out;
}

// Reasoning to its item, content to the message item (opened on its first text), calls.
std::string ResponsesStreamEncoder::emit(const AnswerParts& parts) {
  std::string out;
  if (!parts.reasoning.empty()) out += emit_reasoning(parts.reasoning);
  if (!parts.content.empty() || !parts.calls.empty()) out += close_reasoning();
  if (!parts.content.empty()) {
    out += open_message();
    text_ += parts.content;
    out += event("response.output_text.delta", {{"item_id", format_.item_id},
                                                {"output_index", int(*message_index_)},
                                                {"content_index", 0},
                                                {"delta", parts.content},
                                                {"logprobs", Json::array()}});
  }
  for (const ToolCall& call : parts.calls) out += emit_call(call);
  return out;
}

std::string ResponsesStreamEncoder::chunk(int, const StreamChunk& chunk) {
  append_chunk(result_, chunk);
  if (chunk.text.empty()) return {};
  return emit(answer_.push(chunk.text));
}

std::string ResponsesStreamEncoder::end() {
  std::string out = emit(answer_.finish());
  out += close_reasoning();
  // An answer with no text and no call is still a message.
  if (!message_index_ && items_.size() == (reasoning_index_ ? 1u : 0u)) out += open_message();
  out += close_message();
  out += event("response.completed", {{"response", response_json(meta_, format_, &result_, items_)}});
  return out;
}

std::string ResponsesStreamEncoder::error(const std::string& message) {
  return event("error", {{"code", "server_error"}, {"message", message}, {"param", Json()}});
}

}  // namespace tandem::server
