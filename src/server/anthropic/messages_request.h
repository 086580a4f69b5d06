// POST /v1/messages (Anthropic): the body, validated. `max_tokens` is required, as in
// Anthropic's API; `system`, content blocks, `stop_sequences`, `tools` and `tool_choice`
// become the chat-template conversation (anthropic_messages.h).
#pragma once

#include "engine/request.h"
#include "server/common/generation_fields.h"
#include "server/common/request_fields.h"
#include "server/common/server_limits.h"

namespace tandem::server {

// max_tokens always set; forced_tools: tool_choice {"type": "any"} or {"type": "tool", "name"}.
struct MessagesRequest : ChatGeneration {};

MessagesRequest parse_messages_request(const Json& body, const GenerationRequest& defaults,
                                       int vocab_size, const RequestLimits& limits = {});

// The conversation part alone (also what /v1/messages/count_tokens reads): system,
// messages, tools and tool_choice, template kwargs.
void read_anthropic_conversation(const FieldReader& fields, ChatGeneration& out);

}  // namespace tandem::server
