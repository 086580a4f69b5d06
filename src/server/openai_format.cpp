#include "server/openai_format.h"

#include "server/ids.h"
#include "server/sse.h"

namespace tandem::server {

const char* openai_finish_reason(FinishReason reason, bool has_tool_calls) {
  switch (reason) {
    case FinishReason::Stop:
      return has_tool_calls ? "tool_calls" : "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "abort";
    case FinishReason::Error:
      return "error";
  }
  return "stop";
}

Json openai_stop_reason(const std::string& matched_stop) {
  return matched_stop.empty() ? Json() : Json(matched_stop);
}

Json openai_usage(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

Json openai_tool_call(const ToolCall& call, std::optional<int> index) {
  Json out = Json::object();
  if (index) out["index"] = *index;
  out["id"] = random_id("call_");
  out["type"] = "function";
  out["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return out;
}

std::string openai_stream_end(const ResponseMeta& meta, const char* object, bool include_usage,
                              int prompt_tokens, int completion_tokens) {
  std::string out;
  if (include_usage) {
    out += sse_data({{"id", meta.id},
                     {"object", object},
                     {"created", meta.created},
                     {"model", meta.model},
                     {"choices", Json::array()},
                     {"usage", openai_usage(prompt_tokens, completion_tokens)}});
  }
  out += kSseDone;
  return out;
}

std::string openai_stream_error(const std::string& message) {
  Json error = {
      {"message", message}, {"type", "server_error"}, {"param", Json()}, {"code", Json()}};
  std::string out = sse_data({{"error", std::move(error)}});
  out += kSseDone;
  return out;
}

}  // namespace tandem::server
