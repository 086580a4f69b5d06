// POST /v1/responses, the basic OpenAI Responses API: `input` as a text or a list of
// messages (text parts only), `instructions`, `max_output_tokens`, the sampling fields
// and `stream`; text.format json_object / json_schema is enforced (structured_output.h).
// Tools and stored conversations (previous_response_id) are refused with a 400 that says so.
#pragma once

#include <optional>

#include "engine/request.h"
#include "server/chat_prompt.h"
#include "server/server_limits.h"
#include "server/structured_output.h"

namespace tandem::server {

struct ResponsesRequest {
  ChatPromptInput prompt;
  GenerationRequest generation;  // prompt empty
  std::optional<int64_t> max_output_tokens;
  bool stream = false;
  Json echo = Json::object();  // request fields the response object repeats
  OutputConstraint constraint;  // text.format
};

ResponsesRequest parse_responses_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits = {});

}  // namespace tandem::server
