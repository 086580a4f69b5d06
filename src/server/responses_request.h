// POST /v1/responses, the basic OpenAI Responses API: `input` as a text or a list of
// messages (text parts only), `instructions`, `max_output_tokens`, the sampling fields
// and `stream`. Tools, stored conversations (previous_response_id) and structured
// output are refused with a 400 that says so.
#pragma once

#include <optional>

#include "engine/request.h"
#include "server/chat_prompt.h"
#include "server/server_limits.h"

namespace tandem::server {

struct ResponsesRequest {
  ChatPromptInput prompt;
  GenerationRequest generation;  // prompt empty
  std::optional<int64_t> max_output_tokens;
  bool stream = false;
  Json echo = Json::object();  // request fields the response object repeats
};

ResponsesRequest parse_responses_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits = {});

}  // namespace tandem::server
