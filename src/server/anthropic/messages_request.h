// POST /v1/messages (Anthropic): the body, validated. `max_tokens` is required, as in
// Anthropic's API; `system`, content blocks, `stop_sequences`, `tools` and `tool_choice`
// become the chat-template conversation (anthropic_messages.h).
#pragma once

#include "engine/request.h"
#include "server/common/chat_prompt.h"
#include "server/common/request_fields.h"
#include "server/common/server_limits.h"
#include "server/common/structured_output.h"

namespace tandem::server {

struct MessagesRequest {
  ChatPromptInput prompt;
  GenerationRequest generation;  // prompt empty, max_tokens not yet checked against context
  int64_t max_tokens = 0;
  bool stream = false;
  bool parse_tool_calls = false;
  ToolForcing forced_tools;  // tool_choice {"type": "any"} or {"type": "tool", "name"}
};

MessagesRequest parse_messages_request(const Json& body, const GenerationRequest& defaults,
                                       int vocab_size, const RequestLimits& limits = {});

// The conversation part alone (also what /v1/messages/count_tokens reads). Sets
// `parse_tool_calls` when tools are given and tool_choice allows calls.
ChatPromptInput read_anthropic_prompt(const FieldReader& fields, bool& parse_tool_calls);

}  // namespace tandem::server
