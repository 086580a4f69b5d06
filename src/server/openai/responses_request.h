// POST /v1/responses, the OpenAI Responses API: `input` as a text or a list of items —
// messages (text parts only), `function_call` and `function_call_output` (a tool round
// trip, given back as the conversation's assistant tool calls and tool results) —
// `instructions`, `max_output_tokens`, the sampling fields and `stream`; function `tools`
// with `tool_choice` auto / none / required / {"type": "function", "name"} (a forced call's
// arguments follow the tool's schema, structured_output.h); text.format json_object /
// json_schema is enforced. Other tool types (web search, file search, ...) and stored
// conversations (previous_response_id) are refused with a 400 that says so.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/common/generation_fields.h"
#include "server/common/server_limits.h"

namespace tandem::server {

// max_tokens: max_output_tokens; constraint: text.format.
struct ResponsesRequest : ChatGeneration {
  Json echo = Json::object();  // request fields the response object repeats
};

ResponsesRequest parse_responses_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits = {});

}  // namespace tandem::server
