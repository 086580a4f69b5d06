// Anthropic conversation input as chat-template messages (the shape chat_prompt.h's
// ChatPromptInput holds, which OpenAI's messages are normalized into too).
#pragma once

#include <vector>

#include "server/common/image_parts.h"
#include "server/common/json_text.h"

namespace tandem::server {

// Anthropic `system` (string or text blocks) and `messages` (user/assistant turns with
// text, image, tool_use and tool_result blocks) as chat-template messages: tool_use becomes
// an assistant tool_call, tool_result a "tool" message, and a user turn's image blocks go
// to `images` in order, {"type": "image"} items in its content (common/content_parts.h);
// without `images`, image blocks are 400s.
Json anthropic_to_chat_messages(const Json* system, const Json& messages,
                                std::vector<ImagePart>* images = nullptr);

// Anthropic `tools` ([{"name", "description"?, "input_schema"}]) as OpenAI-style tools.
Json anthropic_tools_to_chat(const Json* tools);

}  // namespace tandem::server
