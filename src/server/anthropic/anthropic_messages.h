// Anthropic conversation input as chat-template messages (the shape chat_prompt.h's
// ChatPromptInput holds, which OpenAI's messages are normalized into too).
#pragma once

#include "server/common/json_text.h"

namespace tandem::server {

// Anthropic `system` (string or text blocks) and `messages` (user/assistant turns with
// text, tool_use and tool_result blocks) as chat-template messages: tool_use becomes an
// assistant tool_call, tool_result a "tool" message.
Json anthropic_to_chat_messages(const Json* system, const Json& messages);

// Anthropic `tools` ([{"name", "description"?, "input_schema"}]) as OpenAI-style tools.
Json anthropic_tools_to_chat(const Json* tools);

}  // namespace tandem::server
