#include "server/responses_response.h"

#include "server/sse.h"

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

Json usage_json(int input_tokens, int output_tokens, int cached_tokens) {
  return {{"input_tokens", input_tokens},
          {"input_tokens_details", {{"cached_tokens", cached_tokens}}},
          {"output_tokens", output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input_tokens + output_tokens}};
}

// The response object; `result` null while in progress.
Json response_json(const ResponseMeta& meta, const ResponsesFormat& f, const ChoiceResult* result) {
  bool done = result != nullptr;
  bool incomplete = done && result->finish == FinishReason::Length;
  Json output = Json::array();
  if (done)
    output.push_back(message_item(f, incomplete ? "incomplete" : "completed",
                                  Json::array({output_text(result->text)})));
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
            {"parallel_tool_calls", false},
            {"tool_choice", "auto"},
            {"tools", Json::array()},
            {"text", {{"format", {{"type", "text"}}}}},
            {"store", false},
            {"usage", done ? usage_json(f.input_tokens, result->completion_tokens, result->cached_tokens)
                         : Json()}};
  for (auto it = f.echo.begin(); it != f.echo.end(); ++it) r[it.key()] = it.value();
  return r;
}

}  // namespace

Json format_response(const ResponseMeta& meta, const ResponsesFormat& format,
                     const ChoiceResult& result) {
  return response_json(meta, format, &result);
}

ResponsesStreamEncoder::ResponsesStreamEncoder(ResponseMeta meta, ResponsesFormat format)
    : meta_(std::move(meta)), format_(std::move(format)) {}

std::string ResponsesStreamEncoder::event(const char* type, Json fields) {
  Json payload = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto it = fields.begin(); it != fields.end(); ++it) payload[it.key()] = it.value();
  return sse_event(type, payload);
}

// Events are appended one statement at a time: each takes the next sequence number.
std::string ResponsesStreamEncoder::begin() {
  Json in_progress = response_json(meta_, format_, nullptr);
  std::string out = event("response.created", {{"response", in_progress}});
  out += event("response.in_progress", {{"response", in_progress}});
  out +=
      event("response.output_item.added",
            {{"output_index", 0}, {"item", message_item(format_, "in_progress", Json::array())}});
  out += event("response.content_part.added", {{"item_id", format_.item_id},
                                               {"output_index", 0},
                                               {"content_index", 0},
                                               {"part", output_text("")}});
  return out;
}

std::string ResponsesStreamEncoder::chunk(int, const StreamChunk& chunk) {
  append_chunk(result_, chunk);
  if (chunk.text.empty()) return {};
  return event("response.output_text.delta", {{"item_id", format_.item_id},
                                              {"output_index", 0},
                                              {"content_index", 0},
                                              {"delta", chunk.text},
                                              {"logprobs", Json::array()}});
}

std::string ResponsesStreamEncoder::end() {
  Json done = response_json(meta_, format_, &result_);
  Json item = done["output"][0];
  std::string out = event("response.output_text.done", {{"item_id", format_.item_id},
                                                        {"output_index", 0},
                                                        {"content_index", 0},
                                                        {"text", result_.text},
                                                        {"logprobs", Json::array()}});
  out += event("response.content_part.done", {{"item_id", format_.item_id},
                                              {"output_index", 0},
                                              {"content_index", 0},
                                              {"part", output_text(result_.text)}});
  out += event("response.output_item.done", {{"output_index", 0}, {"item", item}});
  out += event("response.completed", {{"response", done}});
  return out;
}

std::string ResponsesStreamEncoder::error(const std::string& message) {
  return event("error", {{"code", "server_error"}, {"message", message}, {"param", Json()}});
}

}  // namespace tandem::server
