#include "server/openai/openai_format.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/common/ids.h"
#include "server/common/sse.h"

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

Json openai_usage(const TokenUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

int cached_prompt_tokens(std::span<const int> per_choice, int choices_per_prompt) {
  const size_t n = size_t(std::max(1, choices_per_prompt));
  int total = 0;
  for (size_t first = 0; first < per_choice.size(); first += n) {
    int best = 0;
    for (size_t i = first; i < std::min(per_choice.size(), first + n); i++)
      best = std::max(best, per_choice[i]);
    total += best;
  }
  return total;
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
                              const TokenUsage& usage) {
  std::string out;
  if (include_usage) {
    out += sse_data({{"id", meta.id},
                     {"object", object},
                     {"created", meta.created},
                     {"model", meta.model},
                     {"choices", Json::array()},
                     {"usage", openai_usage(usage)}});
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
