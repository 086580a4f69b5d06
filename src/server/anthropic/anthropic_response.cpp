#include "server/anthropic/anthropic_response.h"

#include "server/common/bounded_json.h"
#include "server/common/ids.h"
#include "server/common/sse.h"

namespace tandem::server {
namespace {

Json tool_use_json(const ToolCall& call, Json input) {
  return {{"type", "tool_use"},
          {"id", random_id("toolu_")},
          {"name", call.name},
          {"input", std::move(input)}};
}

Json thinking_json(const std::string& thinking) {
  return {{"type", "thinking"}, {"thinking", thinking}, {"signature", ""}};
}

Json parsed_arguments(const ToolCall& call) {
  JsonParse parsed = parse_bounded_json(call.arguments, JsonLimits{});
  // parse_tool_calls only yields objects it has parsed under the same limits; defensive.
  return parsed.value ? std::move(*parsed.value) : Json::object();
}

// Anthropic counts cache reads apart: the prompt is input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens.
Json anthropic_usage_json(int prompt_tokens, int output_tokens, int cached_tokens = 0) {
  return {{"input_tokens", prompt_tokens - cached_tokens},
          {"output_tokens", output_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached_tokens}};
}

Json message_json(const ResponseMeta& meta, Json content, Json stop_reason, Json stop_sequence,
                  Json usage) {
  return {{"id", meta.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", meta.model},
          {"content", std::move(content)},
          {"stop_reason", std::move(stop_reason)},
          {"stop_sequence", std::move(stop_sequence)},
          {"usage", std::move(usage)}};
}

}  // namespace

const char* anthropic_stop_reason(FinishReason reason, bool has_tool_use,
                                  const std::string& matched_stop) {
  if (reason == FinishReason::Length) return "max_tokens";
  if (has_tool_use) return "tool_use";
  return matched_stop.empty() ? "end_turn" : "stop_sequence";
}

Json format_anthropic_message(const ResponseMeta& meta, const AnthropicFormat& format,
                              const ChoiceResult& result) {
  AnswerParts parsed = split_answer(result.text, format.reasoning, format.parse_tool_calls);
  Json content = Json::array();
  if (!parsed.reasoning.empty()) content.push_back(thinking_json(parsed.reasoning));
  if (!parsed.content.empty() || parsed.calls.empty())
    content.push_back({{"type", "text"}, {"text", parsed.content}});
  for (const ToolCall& call : parsed.calls)
    content.push_back(tool_use_json(call, parsed_arguments(call)));
  bool stopped_by_string =
      !result.matched_stop.empty() && parsed.calls.empty() && result.finish == FinishReason::Stop;
  return message_json(
      meta, std::move(content),
      anthropic_stop_reason(result.finish, !parsed.calls.empty(), result.matched_stop),
      stopped_by_string ? Json(result.matched_stop) : Json(),
      anthropic_usage_json(format.input_tokens, result.completion_tokens, result.cached_tokens));
}

AnthropicStreamEncoder::AnthropicStreamEncoder(ResponseMeta meta, AnthropicFormat format)
    : meta_(std::move(meta)),
      format_(format),
      answer_(format_.reasoning, format_.parse_tool_calls) {}

std::string AnthropicStreamEncoder::begin() {
  Json message =
      message_json(meta_, Json::array(), Json(), Json(), anthropic_usage_json(format_.input_tokens, 0));
  return sse_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
         sse_event("ping", {{"type", "ping"}});
}

// The thinking block comes first (the reasoning always precedes the answer): opened on the
// first reasoning text, closed, signature last, when the answer begins or at the end.
std::string AnthropicStreamEncoder::thinking_delta(const std::string& text) {
  std::string out;
  if (!thinking_open_) {
    out += sse_event("content_block_start", {{"type", "content_block_start"},
                                             {"index", next_index_},
                                             {"content_block", thinking_json("")}});
    thinking_open_ = true;
  }
  out += sse_event("content_block_delta",
                   {{"type", "content_block_delta"},
                    {"index", next_index_},
                    {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}});
  return out;
}

std::string AnthropicStreamEncoder::close_thinking_block() {
  if (!thinking_open_) return {};
  thinking_open_ = false;
  const int index = next_index_++;
  return sse_event("content_block_delta",
                   {{"type", "content_block_delta"},
                    {"index", index},
                    {"delta", {{"type", "signature_delta"}, {"signature", ""}}}}) +
         sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
}

std::string AnthropicStreamEncoder::text_delta(const std::string& text) {
  std::string out;
  has_text_ = true;
  if (!text_open_) {
    out += sse_event("content_block_start", {{"type", "content_block_start"},
                                             {"index", next_index_},
                                             {"content_block", {{"type", "text"}, {"text", ""}}}});
    text_open_ = true;
  }
  if (!text.empty())
    out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", next_index_},
                                             {"delta", {{"type", "text_delta"}, {"text", text}}}});
  return out;
}

std::string AnthropicStreamEncoder::close_text_block() {
  if (!text_open_) return {};
  text_open_ = false;
  return sse_event("content_block_stop",
                   {{"type", "content_block_stop"}, {"index", next_index_++}});
}

std::string AnthropicStreamEncoder::tool_use_block(const ToolCall& call) {
  int index = next_index_++;
  ++num_tool_uses_;
  return sse_event("content_block_start",
                   {{"type", "content_block_start"},
                    {"index", index},
                    {"content_block", tool_use_json(call, Json::object())}}) +
         sse_event("content_block_delta",
                   {{"type", "content_block_delta"},
                    {"index", index},
                    {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}}) +
         sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
}

std::string AnthropicStreamEncoder::chunk(int, const StreamChunk& chunk) {
  output_tokens_ += int(chunk.tokens.size());
  AnswerParts delta = answer_.take(chunk);
  std::string out;
  if (!delta.reasoning.empty()) out += thinking_delta(delta.reasoning);
  if (!delta.content.empty() || !delta.calls.empty()) out += close_thinking_block();
  if (!delta.content.empty()) out += text_delta(delta.content);
  for (const ToolCall& call : delta.calls) {
    out += close_text_block();  // before the tool block takes the next index
    out += tool_use_block(call);
  }
  if (chunk.finish) {
    finish_ = *chunk.finish;
    matched_stop_ = chunk.matched_stop;
    if (chunk.completion_tokens > 0) output_tokens_ = chunk.completion_tokens;
    cached_tokens_ = chunk.cached_tokens;
  }
  return out;
}

std::string AnthropicStreamEncoder::end() {
  std::string out = close_thinking_block();
  // Never without a text or tool_use block (a thinking block alone is not an answer).
  if (num_tool_uses_ == 0 && !text_open_ && !has_text_) out += text_delta("");
  out += close_text_block();
  bool has_tool_use = num_tool_uses_ > 0;
  bool stopped_by_string = !matched_stop_.empty() && !has_tool_use && finish_ == FinishReason::Stop;
  Json delta = {{"stop_reason", anthropic_stop_reason(finish_, has_tool_use, matched_stop_)},
                {"stop_sequence", stopped_by_string ? Json(matched_stop_) : Json()}};
  out += sse_event("message_delta", {{"type", "message_delta"},
                                     {"delta", std::move(delta)},
                                     {"usage", anthropic_usage_json(format_.input_tokens, output_tokens_,
                                                          cached_tokens_)}});
  return out + sse_event("message_stop", {{"type", "message_stop"}});
}

std::string AnthropicStreamEncoder::error(const std::string& message) {
  return sse_event("error",
                   {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}});
}

}  // namespace tandem::server
