// Server-sent events framing. OpenAI streams bare `data:` lines ending in `data: [DONE]`;
// Anthropic and the Responses API name each event with an `event:` line.
#pragma once

#include <string>
#include <string_view>

#include "server/common/json_text.h"

namespace tandem::server {

inline std::string sse_data(const Json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

inline std::string sse_event(std::string_view name, const Json& payload) {
  std::string out = "event: ";
  out += name;
  out += '\n';
  return out + sse_data(payload);
}

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace tandem::server
